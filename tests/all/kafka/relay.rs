//! A TCP relay in front of a broker whose metadata names the relay ([`Broker::start_behind`]),
//! so that a client's every connection after its first goes through it: it passes requests
//! and answers on unchanged, except the requests a test asks it to cut ([`Relay::cut`]), on
//! which it closes the client's connection before the broker sees them. The client sees what
//! it sees when the broker it sent a request to is killed, or the network between fails: the
//! connection gone with the request in flight, unanswered. (A broker killed with SIGKILL
//! cannot be timed to the one request a test is about; the relay picks it by its kind.)
//!
//! A Kafka request is a 4-byte big-endian size and that many bytes, the first two of which are
//! the request's API key: enough to pick requests without parsing them. The relay runs in the
//! test's own process; dropping it closes every connection it holds.
//!
//! [`Broker::start_behind`]: super::Broker::start_behind

use std::io::{self, Read as _, Write as _};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;

/// The API key of a CreateTopics request.
pub(crate) const CREATE_TOPICS: i16 = 19;
/// A request larger than this is no Kafka request of a test: the connection is closed.
const MAX_REQUEST: usize = 256 << 20;

/// The relay: listening on a free loopback port until dropped.
pub(crate) struct Relay {
    port: u16,
    shared: Arc<Shared>,
}

/// What the relay's threads share.
#[derive(Default)]
struct Shared {
    /// The broker's port, once known ([`Relay::forward_to`]).
    upstream: Mutex<Option<u16>>,
    /// The API keys of requests to cut, each with how many more of them.
    cuts: Mutex<Vec<(i16, u32)>>,
    /// How many requests were cut.
    cut: AtomicU32,
    /// Set when the relay is dropped.
    stopped: AtomicBool,
    /// Both ends of every connection, to close them when the relay is dropped.
    sockets: Mutex<Vec<TcpStream>>,
}

/// `mutex`, locked whatever a panicking thread left in it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Relay {
    /// A relay listening on a free port of 127.0.0.1; it relays to the broker
    /// [`Relay::forward_to`] names (a connection made before is closed at once, as a broker
    /// not yet listening would refuse it).
    pub(crate) fn start() -> Relay {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let shared = Arc::new(Shared::default());
        let accepting = Arc::clone(&shared);
        thread::Builder::new()
            .name("kafka-relay".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if accepting.stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let shared = Arc::clone(&accepting);
                    let _ = thread::Builder::new()
                        .name("kafka-relay-connection".into())
                        .spawn(move || relay(&shared, client));
                }
            })
            .expect("a thread for the relay");
        Relay { port, shared }
    }

    /// The relay's port.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// `"127.0.0.1:PORT"`, for `bootstrap.servers`.
    pub(crate) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Relays to the broker on `port` of 127.0.0.1 from now on.
    pub(crate) fn forward_to(&self, port: u16) {
        *lock(&self.shared.upstream) = Some(port);
    }

    /// Cuts the connection of each of the next `times` requests with API key `api_key`
    /// (for example [`CREATE_TOPICS`]), before the broker sees it.
    pub(crate) fn cut(&self, api_key: i16, times: u32) {
        lock(&self.shared.cuts).push((api_key, times));
    }

    /// How many requests the relay has cut so far.
    pub(crate) fn cut_count(&self) -> u32 {
        self.shared.cut.load(Ordering::SeqCst)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stopped`.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
        for socket in lock(&self.shared.sockets).drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

impl Shared {
    /// Whether a request with `api_key` is to be cut (one cut used).
    fn take_cut(&self, api_key: i16) -> bool {
        let mut cuts = lock(&self.cuts);
        let Some(left) = cuts
            .iter_mut()
            .find(|(key, left)| *key == api_key && *left > 0)
        else {
            return false;
        };
        left.1 -= 1;
        self.cut.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// The broker's port, if [`Relay::forward_to`] named it yet.
    fn upstream(&self) -> Option<u16> {
        *lock(&self.upstream)
    }

    /// Keeps a clone of `socket`, to close it when the relay is dropped.
    fn keep(&self, socket: &TcpStream) {
        if let Ok(clone) = socket.try_clone() {
            lock(&self.sockets).push(clone);
        }
    }
}

/// Relays one client connection: answers as they come on a thread of their own, requests one
/// at a time here, until either side closes or a request is cut.
fn relay(shared: &Shared, mut client: TcpStream) {
    let upstream = shared
        .upstream()
        .and_then(|port| TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok());
    let Some(mut upstream) = upstream else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    shared.keep(&client);
    shared.keep(&upstream);
    if let (Ok(mut answers), Ok(mut to_client)) = (upstream.try_clone(), client.try_clone()) {
        let _ = thread::Builder::new()
            .name("kafka-relay-answers".into())
            .spawn(move || {
                let _ = io::copy(&mut answers, &mut to_client);
                let _ = to_client.shutdown(Shutdown::Both);
            });
    }
    loop {
        let mut size = [0u8; 4];
        if client.read_exact(&mut size).is_err() {
            break;
        }
        let Ok(length) = usize::try_from(i32::from_be_bytes(size)) else {
            break;
        };
        if length > MAX_REQUEST {
            break;
        }
        let mut request = vec![0u8; length];
        if client.read_exact(&mut request).is_err() {
            break;
        }
        if let [high, low, ..] = request[..]
            && shared.take_cut(i16::from_be_bytes([high, low]))
        {
            break;
        }
        if upstream
            .write_all(&size)
            .and_then(|()| upstream.write_all(&request))
            .is_err()
        {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
}
