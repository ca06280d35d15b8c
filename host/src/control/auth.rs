//! Who is let in: a client with the job's token, or a browser with the
//! dashboard's session cookie, on every address, loopback included.
//!
//! Why on loopback too: any local user can connect to 127.0.0.1, and the
//! endpoint acts for the job's owner (it cancels the job, writes savepoints
//! into its directory, shows its paths and pid). The token is what only the
//! owner holds: `WEIR_CONTROL_TOKEN` when set (so a Prometheus configuration
//! can know it beforehand), otherwise 16 random bytes from `/dev/urandom` in
//! hex, written to the job's `_control.json` (mode 0600, in the checkpoint
//! directory), where the CLI verbs read it. A client sends it as
//! `Authorization: Bearer TOKEN`. Never in the URL: URLs end up in browser
//! history, logs and `Referer` headers.
//!
//! A browser gets a session cookie instead, through a one-time login link
//! (see `login.rs`): its secret is another random token of the
//! job's process, sent back as `weir_session_PORT` (named after the port
//! because browsers do not tell cookies of one host apart by port).

use std::fmt;
use std::io::Read;

/// The environment variable a token is taken from.
pub const TOKEN_ENV: &str = "WEIR_CONTROL_TOKEN";

/// Random bytes in a generated token (32 hex digits).
const TOKEN_BYTES: usize = 16;

/// A secret that authorizes requests. Its `Debug` form hides it, so it never
/// lands in a log by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

/// Why a token cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// A given token has characters a header or URL cannot carry as they are.
    #[error(
        "the control token (from {origin}) must be 1 to 256 characters among letters, digits \
         and - . _ ~ + / = (it travels in an HTTP header and a cookie): choose another"
    )]
    Invalid {
        /// Where it came from (`WEIR_CONTROL_TOKEN`, `--token`).
        origin: String,
    },
    /// No random bytes for a new token.
    #[error(
        "cannot generate a control token from /dev/urandom: {source}; set {TOKEN_ENV} to a token \
         of your own"
    )]
    Random {
        /// Why /dev/urandom could not be read.
        source: std::io::Error,
    },
}

impl Token {
    /// `text` as a token, if it is one (see [`TokenError::Invalid`]);
    /// `origin` names where it came from, for the message.
    pub fn new(text: &str, origin: &str) -> Result<Token, TokenError> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~+/=".contains(c);
        if text.is_empty() || text.len() > 256 || !text.chars().all(allowed) {
            return Err(TokenError::Invalid {
                origin: origin.to_string(),
            });
        }
        Ok(Token(text.to_string()))
    }

    /// A new random token: 16 bytes from `/dev/urandom`, in hex.
    pub fn generate() -> Result<Token, TokenError> {
        let mut bytes = [0u8; TOKEN_BYTES];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(|source| TokenError::Random { source })?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The token of `WEIR_CONTROL_TOKEN` if it is set (and not empty),
    /// otherwise a generated one.
    pub fn from_env_or_generate() -> Result<Token, TokenError> {
        match std::env::var(TOKEN_ENV) {
            Ok(text) if !text.is_empty() => Token::new(&text, TOKEN_ENV),
            _ => Token::generate(),
        }
    }

    /// The secret itself, to send or to write into `_control.json`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is this token, in time that does not depend on
    /// where they differ (no byte-by-byte guessing through response times).
    pub fn matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), candidate.as_bytes());
        let mut difference = a.len() ^ b.len();
        for (i, x) in a.iter().enumerate() {
            difference |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
        }
        difference == 0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

/// The name of the session cookie of the endpoint on `port`.
pub fn session_cookie_name(port: u16) -> String {
    format!("weir_session_{port}")
}

/// Why a request was not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// It carried no token and no session cookie.
    #[error(
        "this endpoint requires the job's token: send `Authorization: Bearer TOKEN` with the \
         token in the job's _control.json (readable by the job's owner only), or \
         WEIR_CONTROL_TOKEN if the job was started with it; in a browser, open a one-time \
         link: `weir dashboard DIR` prints one"
    )]
    Missing,
    /// It carried another token.
    #[error(
        "wrong token: use the one in the job's _control.json (or WEIR_CONTROL_TOKEN if the job \
         was started with it)"
    )]
    Wrong,
    /// It carried a session cookie of another process (the job restarted).
    #[error(
        "this dashboard session is not the running job's (was it restarted?): open a new \
         one-time link, printed by `weir dashboard DIR`"
    )]
    StaleSession,
}

/// Lets a request in when its `authorization` header value is
/// `Bearer TOKEN` with `token`, or, without one, when one of its `cookies`
/// headers holds the cookie `cookie_name` with the `session` secret.
pub fn check(
    token: &Token,
    session: &Token,
    cookie_name: &str,
    authorization: Option<&str>,
    cookies: &[&str],
) -> Result<(), AuthFailure> {
    let bearer = authorization.and_then(|value| {
        let (scheme, given) = value.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| given.trim())
    });
    if let Some(given) = bearer {
        return if token.matches(given) {
            Ok(())
        } else {
            Err(AuthFailure::Wrong)
        };
    }
    let mut sessions = cookies
        .iter()
        .flat_map(|header| header.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == cookie_name)
        .map(|(_, value)| value.trim())
        .peekable();
    if sessions.peek().is_none() {
        return Err(AuthFailure::Missing);
    }
    if sessions.any(|value| session.matches(value)) {
        Ok(())
    } else {
        Err(AuthFailure::StaleSession)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str) -> Token {
        Token::new(text, "a test").unwrap()
    }

    const COOKIE: &str = "weir_session_9";

    #[test]
    fn accepts_the_token_as_a_bearer_header() {
        let (t, session) = (token("s3cret"), token("sess"));
        assert_eq!(
            check(&t, &session, COOKIE, Some("Bearer s3cret"), &[]),
            Ok(())
        );
        assert_eq!(
            check(&t, &session, COOKIE, Some("bearer  s3cret "), &[]),
            Ok(())
        );
    }

    #[test]
    fn accepts_the_session_cookie_among_others() {
        let (t, session) = (token("s3cret"), token("sess"));
        let cookies = ["a=1; weir_session_8=old", "weir_session_9=sess; b=2"];
        assert_eq!(check(&t, &session, COOKIE, None, &cookies), Ok(()));
        assert_eq!(
            check(&t, &session, COOKIE, None, &["weir_session_9=other"]),
            Err(AuthFailure::StaleSession)
        );
        // The cookie of another port's endpoint is not this one's.
        assert_eq!(
            check(&t, &session, COOKIE, None, &["weir_session_8=sess"]),
            Err(AuthFailure::Missing)
        );
        // The session secret is not the token, and the token is not a session.
        assert_eq!(
            check(&t, &session, COOKIE, Some("Bearer sess"), &[]),
            Err(AuthFailure::Wrong)
        );
        assert_eq!(
            check(&t, &session, COOKIE, None, &["weir_session_9=s3cret"]),
            Err(AuthFailure::StaleSession)
        );
    }

    #[test]
    fn refuses_a_missing_or_wrong_token() {
        let (t, session) = (token("s3cret"), token("sess"));
        let refused = |authorization| check(&t, &session, COOKIE, authorization, &[]);
        assert_eq!(refused(None), Err(AuthFailure::Missing));
        assert_eq!(refused(Some("Basic s3cret")), Err(AuthFailure::Missing));
        assert_eq!(refused(Some("Bearer s3cre")), Err(AuthFailure::Wrong));
        assert_eq!(refused(Some("Bearer s3cret2")), Err(AuthFailure::Wrong));
        assert_eq!(refused(Some("Bearer ")), Err(AuthFailure::Missing));
        assert!(
            AuthFailure::Missing.to_string().contains("_control.json"),
            "the message names where the token is"
        );
    }

    #[test]
    fn generated_tokens_are_32_hex_digits_and_differ() {
        let (a, b) = (Token::generate().unwrap(), Token::generate().unwrap());
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), "Token(…)");
    }

    #[test]
    fn refuses_tokens_a_header_cannot_carry() {
        for bad in ["", "two words", "new\nline", "é", &"x".repeat(257)] {
            let error = Token::new(bad, "WEIR_CONTROL_TOKEN").unwrap_err();
            assert!(error.to_string().contains("WEIR_CONTROL_TOKEN"), "{error}");
        }
        assert!(Token::new("abc-DEF_0.9~+/=", "x").is_ok());
    }
}
