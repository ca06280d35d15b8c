//! Checkpoints on object storage: `[checkpoint] directory = "s3://bucket/prefix"` (S3 or an
//! S3-compatible store), `"gs://bucket/prefix"` (Google Cloud Storage) or
//! `"az://container/prefix"` (Azure Blob Storage), all through `object_store`. The text below
//! speaks of S3; the other two map the same way, with their own credentials.
//!
//! Why a module of its own: the checkpoint rules (framing, paths, commit order, listing,
//! cleanup) are written once over a minimal file system ([`Files`]), and an object store is one
//! more bottom layer under them, not a second implementation of the rules. This module maps
//! that file system onto S3's objects:
//!
//! - a path under the job's URL is an object key (`s3://bucket/prefix/chk-0000000007/_metadata`
//!   is key `prefix/chk-0000000007/_metadata` in `bucket`); directories do not exist, a
//!   "directory" is the prefix of the keys below it, so creating one and syncing one do nothing;
//! - a write is one `PUT` (atomic: an object is whole or absent, so no `.tmp` and no rename);
//!   one larger than [`MULTIPART_THRESHOLD`] is a multipart upload, whose object appears only
//!   when the upload completes; a write that must not replace (the `_metadata` that publishes a
//!   checkpoint) is a conditional `PUT` (`If-None-Match: *`), so a completed checkpoint is never
//!   overwritten — not by a retry, not by a zombie still running after its replacement started;
//! - every request is retried by `object_store` on throttling, server errors and dropped
//!   connections, with exponential backoff, within a bound (`ObjectStoreOptions::retry_config`); what still fails
//!   is an error naming the operation and the path, as a local disk's would be.
//!
//! Credentials come from where AWS tools look for them — the `AWS_*` environment variables,
//! web identity (Kubernetes service accounts), container and instance metadata — and from the
//! shared credentials file (`~/.aws/credentials`, profile `AWS_PROFILE` or `default`) when the
//! environment names no key. They are never logged: the storage's `Debug` shows its URL only.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::path::Path as Key;
use object_store::{
    BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    RetryConfig, WriteMultipart,
};

use super::{Entry, FileStore, Files};
use crate::checkpoint::format::{IoError, Overwrite};
use crate::checkpoint::layout::CheckpointLayout;

/// Writes larger than this are multipart uploads: S3 takes at most 5 GiB in one `PUT`, and a
/// part that fails is retried alone.
pub const MULTIPART_THRESHOLD: usize = 64 << 20;
/// The size of each part of a multipart upload (S3's least is 5 MiB).
const PART_SIZE: usize = 16 << 20;
/// How many parts of one upload are sent at once.
const PARTS_IN_FLIGHT: usize = 4;
/// How long a request may wait before the log says so: its retries (up to
/// `storage_retry_timeout`) can otherwise hold a checkpoint or a restart without a word.
const STALL_WARNING: Duration = Duration::from_secs(5);

/// Which object store a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `s3://bucket/prefix`: Amazon S3 or an S3-compatible store.
    S3,
    /// `gs://bucket/prefix`: Google Cloud Storage.
    Gcs,
    /// `az://container/prefix`: Azure Blob Storage (the account from `AZURE_STORAGE_ACCOUNT_NAME`).
    Azure,
}

impl Scheme {
    /// The scheme as a URL writes it: `s3`, `gs`, `az`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::S3 => "s3",
            Scheme::Gcs => "gs",
            Scheme::Azure => "az",
        }
    }
}

/// Where a job's checkpoints live when they are not in a local directory: an `s3://`, `gs://`
/// or `az://` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct ObjectStoreUrl {
    /// Which store.
    scheme: Scheme,
    /// The bucket (a container on Azure).
    bucket: String,
    /// The key prefix of the job's checkpoints, without slashes at either end; may be empty.
    prefix: String,
}

/// Why a `[checkpoint] directory` that looks like a URL cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// A scheme other than `s3://`, `gs://` and `az://`.
    #[error(
        "{url:?}: checkpoints on {scheme}:// are not supported; use an s3:// URL (S3 or an \
         S3-compatible store, whose endpoint AWS_ENDPOINT_URL names), gs:// (Google Cloud \
         Storage), az:// (Azure Blob Storage) or a local directory"
    )]
    Scheme {
        /// The URL as written.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// No bucket after `s3://`.
    #[error("{url:?} names no bucket: write s3://BUCKET/PREFIX")]
    NoBucket {
        /// The URL as written.
        url: String,
    },
    /// A prefix that is not a valid object key prefix.
    #[error(
        "{url:?}: the key prefix {prefix:?} is not usable ({problem}); use segments of letters, \
         digits and -_. separated by single slashes"
    )]
    Prefix {
        /// The URL as written.
        url: String,
        /// The prefix.
        prefix: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl ObjectStoreUrl {
    /// The object store `text` names, `Ok(None)` when it is no URL (a local path), or why it
    /// cannot be used.
    pub fn parse(text: &str) -> Result<Option<ObjectStoreUrl>, UrlError> {
        let Some((scheme, rest)) = text.split_once("://") else {
            return Ok(None);
        };
        let is_scheme = !scheme.is_empty()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b));
        if !is_scheme {
            return Ok(None);
        }
        let scheme = match scheme {
            "s3" => Scheme::S3,
            "gs" => Scheme::Gcs,
            "az" => Scheme::Azure,
            other => {
                return Err(UrlError::Scheme {
                    url: text.to_owned(),
                    scheme: other.to_owned(),
                });
            }
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(UrlError::NoBucket {
                url: text.to_owned(),
            });
        }
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty()
            && let Err(e) = Key::parse(prefix)
        {
            return Err(UrlError::Prefix {
                url: text.to_owned(),
                prefix: prefix.to_owned(),
                problem: e.to_string(),
            });
        }
        Ok(Some(ObjectStoreUrl {
            scheme,
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        }))
    }

    /// The bucket (a container on Azure).
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Which store.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The same bucket with `segment` (letters, digits, `-_.`) added to the key prefix: where
    /// one part of a job keeps its own checkpoints.
    pub fn join(&self, segment: &str) -> ObjectStoreUrl {
        let prefix = if self.prefix.is_empty() {
            segment.to_owned()
        } else {
            format!("{}/{segment}", self.prefix)
        };
        ObjectStoreUrl {
            scheme: self.scheme,
            bucket: self.bucket.clone(),
            prefix,
        }
    }

    /// The job's directory as the checkpoint layout sees it: `s3://bucket/prefix`, under which
    /// it builds every path.
    pub fn as_path(&self) -> PathBuf {
        PathBuf::from(self.to_string())
    }
}

impl fmt::Display for ObjectStoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = self.scheme.as_str();
        if self.prefix.is_empty() {
            write!(f, "{scheme}://{}", self.bucket)
        } else {
            write!(f, "{scheme}://{}/{}", self.bucket, self.prefix)
        }
    }
}

impl fmt::Debug for ObjectStoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// How to reach the object store and how its requests are timed and retried
/// (`[checkpoint] storage_endpoint`, `storage_retries`, `storage_retry_timeout`,
/// `storage_request_timeout`). A request that fails with a throttling or server error, a
/// timeout or a dropped connection is retried with exponential backoff from 100 ms to 15 s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectStoreOptions {
    /// Retries of one request at most.
    pub retries: u32,
    /// No retry starts later than this after the first attempt.
    pub retry_timeout: Duration,
    /// The longest one request may take.
    pub request_timeout: Duration,
    /// The URL of an S3-compatible store (`http://` allowed); `None`: `AWS_ENDPOINT_URL`, or
    /// AWS itself.
    pub endpoint: Option<String>,
    /// A key the program gives (tests, benchmarks) instead of the environment's. A job file
    /// never holds one.
    pub credentials: Option<StaticCredentials>,
}

/// An access key given by the program. Its `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct StaticCredentials {
    /// The access key id.
    pub key_id: String,
    /// The secret access key.
    pub secret: String,
}

impl fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticCredentials")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl Default for ObjectStoreOptions {
    /// 10 retries within 3 minutes, 30 s a request (`object_store`'s own defaults); the
    /// endpoint and credentials of the environment.
    fn default() -> Self {
        ObjectStoreOptions {
            retries: 10,
            retry_timeout: Duration::from_secs(180),
            request_timeout: Duration::from_secs(30),
            endpoint: None,
            credentials: None,
        }
    }
}

impl ObjectStoreOptions {
    fn retry_config(&self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(15),
                base: 2.0,
            },
            max_retries: self.retries as usize,
            retry_timeout: self.retry_timeout,
        }
    }
}

/// The file system of the checkpoint rules over one bucket (see the module docs).
pub struct ObjectFiles {
    /// `s3://bucket`: the part of every path before the key.
    bucket_url: String,
    store: Arc<dyn ObjectStore>,
    /// Runs the store's requests: the rules are synchronous and run on threads of their own.
    /// Taken only when dropped.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for ObjectFiles {
    fn drop(&mut self) {
        // Without waiting: the last holder of the storage may be a task of another runtime,
        // where dropping a runtime in place would panic.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl fmt::Debug for ObjectFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the store: its configuration holds the credentials.
        f.debug_struct("ObjectFiles")
            .field("bucket", &self.bucket_url)
            .finish_non_exhaustive()
    }
}

impl ObjectFiles {
    /// The bucket of `url`, reached as `options` say, else as the environment says.
    fn open(url: &ObjectStoreUrl, options: &ObjectStoreOptions) -> Result<ObjectFiles, IoError> {
        let bucket_url = format!("{}://{}", url.scheme.as_str(), url.bucket);
        let failed =
            |e: String| IoError::new("open the object store", &bucket_url, io::Error::other(e));
        if url.scheme != Scheme::S3 && options.credentials.is_some() {
            return Err(failed(
                "static credentials are an S3 access key; give this store's through its \
                 environment"
                    .into(),
            ));
        }
        let timeout = format!("{}ms", options.request_timeout.as_millis());
        let store: Arc<dyn ObjectStore> = match url.scheme {
            Scheme::S3 => Arc::new(
                s3_store(url, options)
                    .build()
                    .map_err(|e| failed(e.to_string()))?,
            ),
            Scheme::Gcs => {
                if options.endpoint.is_some() {
                    return Err(failed(
                        "`storage_endpoint` names an S3-compatible or Azure endpoint; Google \
                         Cloud Storage takes none"
                            .into(),
                    ));
                }
                let store = GoogleCloudStorageBuilder::from_env()
                    .with_bucket_name(&url.bucket)
                    .with_retry(options.retry_config())
                    .with_config(GoogleConfigKey::Client(ClientConfigKey::Timeout), timeout)
                    .build()
                    .map_err(|e| failed(e.to_string()))?;
                Arc::new(store)
            }
            Scheme::Azure => {
                let mut builder = MicrosoftAzureBuilder::from_env()
                    .with_container_name(&url.bucket)
                    .with_retry(options.retry_config())
                    .with_config(AzureConfigKey::Client(ClientConfigKey::Timeout), timeout);
                if let Some(endpoint) = &options.endpoint {
                    builder = builder
                        .with_endpoint(endpoint.clone())
                        .with_allow_http(endpoint.starts_with("http://"));
                }
                Arc::new(builder.build().map_err(|e| failed(e.to_string()))?)
            }
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("weir-object-store")
            .enable_all()
            .build()
            .map_err(|e| IoError::new("start the object store client of", &bucket_url, e))?;
        Ok(ObjectFiles {
            bucket_url,
            store,
            runtime: Some(runtime),
        })
    }

    /// Runs `request` on the client's runtime and waits for it, from any thread (a tokio
    /// worker included: nothing here enters a runtime).
    fn run<T: Send + 'static>(
        &self,
        request: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, io::Error> {
        let (tx, rx) = mpsc::sync_channel(1);
        let runtime = self.runtime.as_ref().expect("taken only when dropped");
        runtime.spawn(async move {
            let _ = tx.send(request.await);
        });
        let stopped = || io::Error::other("the object store client stopped");
        match rx.recv_timeout(STALL_WARNING) {
            Ok(answer) => return Ok(answer),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(stopped()),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        tracing::warn!(
            "a request to {} has waited {} s (retried while the store fails or does not answer, \
             for up to `storage_retry_timeout`): the store may be unreachable",
            self.bucket_url,
            STALL_WARNING.as_secs()
        );
        let started = std::time::Instant::now();
        let answer = rx.recv().map_err(|_| stopped())?;
        tracing::info!(
            "the request to {} answered after {:.1} s",
            self.bucket_url,
            (started.elapsed() + STALL_WARNING).as_secs_f64()
        );
        Ok(answer)
    }

    /// The object key of `path`, or why it has none.
    fn key(&self, path: &Path) -> Result<Key, io::Error> {
        let text = path.to_str().unwrap_or_default();
        let rest = text
            .strip_prefix(&self.bucket_url)
            .and_then(|rest| rest.strip_prefix('/').or((rest.is_empty()).then_some(rest)))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("it is not in {}", self.bucket_url),
                )
            })?;
        Key::parse(rest.trim_end_matches('/'))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
    }

    /// The keys directly below `dir` (objects) and the prefixes there (directories).
    fn listing(&self, dir: &Path) -> Result<Vec<(String, Entry)>, io::Error> {
        let key = self.key(dir)?;
        let store = Arc::clone(&self.store);
        let listed = self.run(async move { store.list_with_delimiter(Some(&key)).await })?;
        let listed = listed.map_err(to_io)?;
        let mut out: Vec<(String, Entry)> = listed
            .objects
            .iter()
            .filter_map(|o| o.location.filename().map(|n| (n.to_owned(), Entry::File)))
            .chain(
                listed
                    .common_prefixes
                    .iter()
                    .filter_map(|p| p.filename().map(|n| (n.to_owned(), Entry::Dir))),
            )
            .collect();
        out.sort();
        Ok(out)
    }
}

/// The S3 client of `url`: the environment's settings, then `options`, then a key from the
/// shared credentials file when neither names one.
fn s3_store(url: &ObjectStoreUrl, options: &ObjectStoreOptions) -> AmazonS3Builder {
    let mut builder = AmazonS3Builder::from_env()
        .with_bucket_name(&url.bucket)
        .with_retry(options.retry_config())
        // A key, not `with_client_options`, which would drop what the environment set
        // (`AWS_ALLOW_HTTP`).
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
            format!("{}ms", options.request_timeout.as_millis()),
        );
    if let Some(endpoint) = &options.endpoint {
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"));
    }
    if let Some(credentials) = &options.credentials {
        builder = builder
            .with_access_key_id(&credentials.key_id)
            .with_secret_access_key(&credentials.secret);
    } else if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
        && let Some(credentials) = shared_credentials()
    {
        builder = builder
            .with_access_key_id(credentials.key_id)
            .with_secret_access_key(credentials.secret);
        if let Some(token) = credentials.token {
            builder = builder.with_token(token);
        }
    }
    builder
}

/// `e` as an I/O error of the kind the checkpoint rules tell apart, with what to do about the
/// usual causes.
fn to_io(e: object_store::Error) -> io::Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
            io::ErrorKind::AlreadyExists
        }
        _ => io::ErrorKind::Other,
    };
    let text = e.to_string();
    match hint(&text) {
        Some(hint) => io::Error::new(kind, format!("{hint} ({text})")),
        None => io::Error::new(kind, text),
    }
}

/// What to do about an error whose text names a usual cause.
fn hint(error: &str) -> Option<&'static str> {
    if error.contains("NoSuchBucket") {
        Some("the bucket does not exist: create it, or name another in `[checkpoint] directory`")
    } else if error.contains("169.254.169.254") {
        Some(
            "no AWS credentials were found (none in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, web \
             identity, or ~/.aws/credentials, and the instance metadata service did not give \
             any): set them in the environment weir runs in",
        )
    } else if [
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
    ]
    .iter()
    .any(|code| error.contains(code))
    {
        Some(
            "the store refused the credentials: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY \
             (and AWS_SESSION_TOKEN), and that they may get, put, list and delete under the \
             job's prefix",
        )
    } else {
        None
    }
}

impl Files for ObjectFiles {
    fn read(&self, path: &Path) -> Result<Vec<u8>, IoError> {
        let error = |e| IoError::new("read", path, e);
        let key = self.key(path).map_err(error)?;
        let store = Arc::clone(&self.store);
        let bytes = self
            .run(async move { store.get(&key).await?.bytes().await })
            .map_err(error)?
            .map_err(|e| error(to_io(e)))?;
        Ok(bytes.to_vec())
    }

    fn write(&self, path: &Path, bytes: &[u8], overwrite: Overwrite) -> Result<(), IoError> {
        let error = |e| IoError::new("write", path, e);
        let key = self.key(path).map_err(error)?;
        let store = Arc::clone(&self.store);
        let payload = bytes::Bytes::copy_from_slice(bytes);
        let written = match overwrite {
            Overwrite::Refuse => self.run(async move {
                let options = PutOptions::from(PutMode::Create);
                store
                    .put_opts(&key, PutPayload::from(payload), options)
                    .await?;
                Ok(())
            }),
            Overwrite::Replace if payload.len() <= MULTIPART_THRESHOLD => self.run(async move {
                store.put(&key, PutPayload::from(payload)).await?;
                Ok(())
            }),
            Overwrite::Replace => self.run(async move {
                let upload = store.put_multipart(&key).await?;
                let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
                for part in 0..payload.len().div_ceil(PART_SIZE) {
                    if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                        // No part is left behind to be billed.
                        let _ = writer.abort().await;
                        return Err(e);
                    }
                    let end = ((part + 1) * PART_SIZE).min(payload.len());
                    writer.put(payload.slice(part * PART_SIZE..end));
                }
                // Aborts the upload itself when a part or the completion fails.
                writer.finish().await?;
                Ok(())
            }),
        };
        written
            .map_err(error)?
            .map_err(|e: object_store::Error| error(to_io(e)))
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn write_raw(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
        self.write(path, bytes, Overwrite::Replace)
    }

    fn create_dir(&self, _dir: &Path) -> Result<(), IoError> {
        // A directory is the prefix of the keys below it.
        Ok(())
    }

    fn is_file(&self, path: &Path) -> bool {
        let Ok(key) = self.key(path) else {
            return false;
        };
        let store = Arc::clone(&self.store);
        self.run(async move { store.head(&key).await })
            .is_ok_and(|head| head.is_ok())
    }

    fn entry(&self, path: &Path) -> Option<Entry> {
        if self.is_file(path) {
            return Some(Entry::File);
        }
        let key = self.key(path).ok()?;
        let store = Arc::clone(&self.store);
        let below = self
            .run(async move { store.list(Some(&key)).next().await })
            .ok()?;
        matches!(below, Some(Ok(_))).then_some(Entry::Dir)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<(String, Entry)>, IoError> {
        self.listing(dir)
            .map_err(|e| IoError::new("list directory", dir, e))
    }

    fn file_sizes(&self, dir: &Path) -> Result<Vec<(String, u64)>, IoError> {
        let error = |e| IoError::new("list directory", dir, e);
        let key = self.key(dir).map_err(error)?;
        let store = Arc::clone(&self.store);
        let listed = self.run(async move { store.list_with_delimiter(Some(&key)).await });
        let listed = listed.map_err(error)?.map_err(|e| error(to_io(e)))?;
        let mut out: Vec<(String, u64)> = listed
            .objects
            .iter()
            .filter_map(|o| Some((o.location.filename()?.to_owned(), o.size)))
            .collect();
        out.sort();
        Ok(out)
    }

    fn remove_file(&self, path: &Path) -> Result<(), IoError> {
        let error = |e| IoError::new("remove", path, e);
        let key = self.key(path).map_err(error)?;
        let store = Arc::clone(&self.store);
        // S3 deletes a missing key without a word: ask first, so a removal of what is gone
        // reads as on a disk.
        let removed = self.run(async move {
            store.head(&key).await?;
            store.delete(&key).await
        });
        removed.map_err(error)?.map_err(|e| error(to_io(e)))
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        let error = |e| IoError::new("remove directory", dir, e);
        let key = self.key(dir).map_err(error)?;
        let store = Arc::clone(&self.store);
        let removed = self.run(async move {
            let keys: Vec<Key> = store
                .list(Some(&key))
                .map_ok(|meta| meta.location)
                .try_collect()
                .await?;
            if keys.is_empty() {
                return Err(object_store::Error::NotFound {
                    path: key.to_string(),
                    source: "no key has this prefix".into(),
                });
            }
            let stream = futures_util::stream::iter(keys.into_iter().map(Ok)).boxed();
            store.delete_stream(stream).try_collect::<Vec<_>>().await?;
            Ok(())
        });
        removed.map_err(error)?.map_err(|e| error(to_io(e)))
    }

    fn sync_dir(&self, _dir: &Path) -> Result<(), IoError> {
        // A completed request is durable: there is nothing to sync.
        Ok(())
    }
}

/// A key from the shared credentials file.
struct SharedCredentials {
    key_id: String,
    secret: String,
    token: Option<String>,
}

/// The credentials of profile `AWS_PROFILE` (or `default`) in the shared credentials file
/// (`AWS_SHARED_CREDENTIALS_FILE`, or `~/.aws/credentials`), if it has a key.
fn shared_credentials() -> Option<SharedCredentials> {
    let path = match std::env::var_os("AWS_SHARED_CREDENTIALS_FILE") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".aws/credentials"),
    };
    let text = std::fs::read_to_string(path).ok()?;
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".to_owned());
    parse_credentials(&text, &profile)
}

/// Profile `profile` of a shared credentials file's text (INI: `[profile]`, then `key = value`
/// lines; `#` and `;` start comments).
fn parse_credentials(text: &str, profile: &str) -> Option<SharedCredentials> {
    let (mut key_id, mut secret, mut token) = (None, None, None);
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == profile;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !inside {
            continue;
        }
        let value = value.trim().to_owned();
        match key.trim() {
            "aws_access_key_id" => key_id = Some(value),
            "aws_secret_access_key" => secret = Some(value),
            "aws_session_token" => token = Some(value),
            _ => {}
        }
    }
    Some(SharedCredentials {
        key_id: key_id?,
        secret: secret?,
        token,
    })
}

/// Checkpoints in an S3 bucket (see the module docs).
pub type ObjectStorage = FileStore<ObjectFiles>;

impl ObjectStorage {
    /// Storage under `layout`, whose paths are in `url`'s bucket, reached and its requests
    /// timed and retried as `requests` says. Sends nothing until the first operation; fails only when
    /// the client cannot be configured (a malformed endpoint).
    pub fn open(
        url: &ObjectStoreUrl,
        layout: CheckpointLayout,
        requests: &ObjectStoreOptions,
    ) -> Result<Self, IoError> {
        Ok(FileStore::over(layout, ObjectFiles::open(url, requests)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed_and_bad_ones_refused_with_the_fix() {
        assert_eq!(ObjectStoreUrl::parse("checkpoints/job").unwrap(), None);
        assert_eq!(ObjectStoreUrl::parse("/abs/path").unwrap(), None);
        let url = ObjectStoreUrl::parse("s3://bucket/a/b/").unwrap().unwrap();
        assert_eq!(url.to_string(), "s3://bucket/a/b");
        assert_eq!(url.as_path(), PathBuf::from("s3://bucket/a/b"));
        let root = ObjectStoreUrl::parse("s3://bucket").unwrap().unwrap();
        assert_eq!(root.to_string(), "s3://bucket");
        for (text, scheme) in [("gs://b/p", Scheme::Gcs), ("az://c/p/q", Scheme::Azure)] {
            let url = ObjectStoreUrl::parse(text).unwrap().unwrap();
            assert_eq!((url.to_string().as_str(), url.scheme()), (text, scheme));
            assert_eq!(url.join("w").to_string(), format!("{text}/w"));
        }
        let hdfs = ObjectStoreUrl::parse("hdfs://b/p").unwrap_err().to_string();
        assert!(
            hdfs.contains("hdfs:// are not supported")
                && hdfs.contains("s3://")
                && hdfs.contains("gs://")
                && hdfs.contains("az://"),
            "{hdfs}"
        );
        let none = ObjectStoreUrl::parse("s3:///p").unwrap_err().to_string();
        assert!(none.contains("names no bucket"), "{none}");
        let bad = ObjectStoreUrl::parse("s3://b/a//../c")
            .unwrap_err()
            .to_string();
        assert!(bad.contains("key prefix"), "{bad}");
    }

    #[test]
    fn the_shared_credentials_file_gives_the_profile_asked_for() {
        let text = "# comment\n[default]\naws_access_key_id = A\naws_secret_access_key=B\n\n\
                    [other]\naws_access_key_id = C\naws_secret_access_key = D\n\
                    aws_session_token = T\n";
        let default = parse_credentials(text, "default").unwrap();
        assert_eq!(
            (default.key_id.as_str(), default.secret.as_str()),
            ("A", "B")
        );
        assert_eq!(default.token, None);
        let other = parse_credentials(text, "other").unwrap();
        assert_eq!(other.token.as_deref(), Some("T"));
        assert!(parse_credentials(text, "missing").is_none());
        assert!(parse_credentials("[default]\naws_access_key_id = A\n", "default").is_none());
    }

    #[test]
    fn each_scheme_opens_its_store_and_refuses_what_is_another_stores() {
        // Opening makes no request; the environment may lack credentials until the first.
        let options = ObjectStoreOptions::default();
        for text in ["gs://bucket/job", "az://container/job"] {
            let url = ObjectStoreUrl::parse(text).unwrap().unwrap();
            let opened = ObjectFiles::open(&url, &options);
            // Azure needs an account (AZURE_STORAGE_ACCOUNT_NAME): its absence is an error
            // naming the store, not a panic.
            if let Err(e) = &opened {
                assert!(
                    e.to_string().contains(text.rsplit_once('/').unwrap().0),
                    "{e}"
                );
            }
            let keyed = ObjectStoreOptions {
                credentials: Some(StaticCredentials {
                    key_id: "k".into(),
                    secret: "s".into(),
                }),
                ..ObjectStoreOptions::default()
            };
            let refused = ObjectFiles::open(&url, &keyed).unwrap_err().to_string();
            assert!(refused.contains("an S3 access key"), "{refused}");
        }
        let gs = ObjectStoreUrl::parse("gs://bucket/job").unwrap().unwrap();
        let endpoint = ObjectStoreOptions {
            endpoint: Some("http://127.0.0.1:1".into()),
            ..ObjectStoreOptions::default()
        };
        let refused = ObjectFiles::open(&gs, &endpoint).unwrap_err().to_string();
        assert!(refused.contains("takes none"), "{refused}");
    }

    #[test]
    fn the_storage_may_be_dropped_inside_another_runtime() {
        let url = ObjectStoreUrl::parse("s3://bucket/job").unwrap().unwrap();
        let storage = ObjectStorage::open(
            &url,
            CheckpointLayout::new(url.as_path()),
            &ObjectStoreOptions::default(),
        )
        .unwrap();
        let other = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // A job's last reference may go in one of its async tasks.
        other.block_on(async move { drop(storage) });
    }

    #[test]
    fn paths_map_to_keys_in_the_bucket_only() {
        let url = ObjectStoreUrl::parse("s3://bucket/jobs/wc")
            .unwrap()
            .unwrap();
        let files = ObjectFiles::open(&url, &ObjectStoreOptions::default()).unwrap();
        let layout = CheckpointLayout::new(url.as_path());
        let metadata = CheckpointLayout::metadata_file(&layout.location(
            crate::ids::CheckpointKind::Checkpoint,
            crate::ids::CheckpointId(7),
        ));
        assert_eq!(
            files.key(&metadata).unwrap().as_ref(),
            "jobs/wc/chk-0000000007/_metadata"
        );
        assert_eq!(files.key(&url.as_path()).unwrap().as_ref(), "jobs/wc");
        assert!(files.key(Path::new("s3://other/jobs")).is_err());
        assert!(files.key(Path::new("s3://bucketx/jobs")).is_err());
        assert!(!format!("{files:?}").to_lowercase().contains("secret"));
    }
}
