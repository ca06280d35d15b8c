//! The token an endpoint reachable from other machines requires.
//!
//! On loopback only local users can connect, and they can read the job's
//! files anyway: no token. Anywhere else every request to the API and the
//! metrics must carry the job's token, as `Authorization: Bearer TOKEN` or
//! (for a browser opening the dashboard) `?token=TOKEN` in the URL. The token
//! comes from `WEIR_CONTROL_TOKEN` when set, so several jobs or a Prometheus
//! configuration can share a known one; otherwise it is 16 random bytes from
//! `/dev/urandom`, written in hex to the job's `_control.json` (mode 0600),
//! where the CLI verbs find it.

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
         and - . _ ~ + / = (it travels in an HTTP header and in URLs): choose another"
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

/// Why a request was not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// It carried no token.
    #[error(
        "this endpoint requires the job's token: send `Authorization: Bearer TOKEN` (or add \
         ?token=TOKEN to the URL); the token is in the job's _control.json, or is \
         WEIR_CONTROL_TOKEN if the job was started with it"
    )]
    Missing,
    /// It carried another token.
    #[error(
        "wrong token: use the one in the job's _control.json (or WEIR_CONTROL_TOKEN if the job \
         was started with it)"
    )]
    Wrong,
}

/// Lets a request in when `expected` is `None` (loopback) or the request
/// carries the token: in its `Authorization` header value (`Bearer TOKEN`)
/// or as `token=` in its URL's `query`.
pub fn check(
    expected: Option<&Token>,
    authorization: Option<&str>,
    query: Option<&str>,
) -> Result<(), AuthFailure> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let from_header = authorization.and_then(|value| {
        let (scheme, token) = value.trim().split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_string())
    });
    let from_query = query.and_then(|q| query_param(q, "token"));
    let given: Vec<String> = from_header.into_iter().chain(from_query).collect();
    if given.is_empty() {
        return Err(AuthFailure::Missing);
    }
    if given.iter().any(|t| expected.matches(t)) {
        Ok(())
    } else {
        Err(AuthFailure::Wrong)
    }
}

/// The value of `name` in a URL query (`a=1&token=x`), percent-decoded.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| percent_decode(value))
    })
}

/// Decodes `%XX` escapes; a broken escape is kept as it is. (`+` stays a
/// plus: a token may contain one.)
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str) -> Token {
        Token::new(text, "a test").unwrap()
    }

    #[test]
    fn loopback_needs_no_token() {
        assert_eq!(check(None, None, None), Ok(()));
        assert_eq!(check(None, Some("Bearer whatever"), None), Ok(()));
    }

    #[test]
    fn accepts_the_token_as_a_bearer_header_or_in_the_query() {
        let t = token("s3cret");
        assert_eq!(check(Some(&t), Some("Bearer s3cret"), None), Ok(()));
        assert_eq!(check(Some(&t), Some("bearer  s3cret "), None), Ok(()));
        assert_eq!(check(Some(&t), None, Some("token=s3cret")), Ok(()));
        assert_eq!(check(Some(&t), None, Some("x=1&token=s3cret&y")), Ok(()));
        assert_eq!(check(Some(&t), None, Some("token=s3cre%74")), Ok(()));
    }

    #[test]
    fn refuses_a_missing_or_wrong_token() {
        let t = token("s3cret");
        assert_eq!(check(Some(&t), None, None), Err(AuthFailure::Missing));
        assert_eq!(
            check(Some(&t), None, Some("x=1")),
            Err(AuthFailure::Missing)
        );
        assert_eq!(
            check(Some(&t), Some("Basic s3cret"), None),
            Err(AuthFailure::Missing)
        );
        assert_eq!(
            check(Some(&t), Some("Bearer s3cre"), None),
            Err(AuthFailure::Wrong)
        );
        assert_eq!(
            check(Some(&t), Some("Bearer s3cret2"), None),
            Err(AuthFailure::Wrong)
        );
        assert_eq!(
            check(Some(&t), None, Some("token=")),
            Err(AuthFailure::Wrong)
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

    #[test]
    fn percent_decoding_keeps_broken_escapes() {
        assert_eq!(percent_decode("a%2Fb"), "a/b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("a+b"), "a+b");
        assert_eq!(percent_decode("%41"), "A");
    }
}
