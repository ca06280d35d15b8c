//! One-time codes that log a browser into the dashboard.
//!
//! Why it exists: a browser opening the dashboard has no way to send
//! `Authorization: Bearer`, and a token in the URL (`?token=…`) would stay in
//! the browser's history and leak in `Referer` headers. Instead `weir run`
//! logs a link `http://127.0.0.1:PORT/login?once=CODE` (and `weir dashboard`
//! prints a fresh one): the code works once, for [`LOGIN_CODE_TTL`], and
//! `/login` answers it with a session cookie (`HttpOnly; SameSite=Strict`)
//! and a redirect to `/`, so the address the browser keeps holds no secret
//! that still works.
//!
//! A synchronous book of issued codes, the clock passed in: tested without a
//! server.

use std::time::{Duration, Instant};

use super::auth::{Token, TokenError};

/// How long a login code can be used after it was issued.
pub(crate) const LOGIN_CODE_TTL: Duration = Duration::from_secs(300);

/// How many unused codes are kept; issuing more drops the oldest.
pub(crate) const MAX_LOGIN_CODES: usize = 16;

/// The codes issued and not yet used nor expired.
#[derive(Debug, Default)]
pub(crate) struct LoginCodes {
    /// Each code and when it was issued, oldest first.
    codes: Vec<(Token, Instant)>,
}

/// Why a login code was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LoginRefusal {
    /// The link carried no code.
    #[error(
        "/login needs a one-time code: open a link `weir dashboard DIR` prints \
         (http://HOST:PORT/login?once=CODE)"
    )]
    Missing,
    /// The code was used already, has expired, or was never issued.
    #[error(
        "this one-time login link was used already or has expired (a link works once, for {} \
         minutes): print a new one with `weir dashboard DIR`",
        LOGIN_CODE_TTL.as_secs() / 60
    )]
    Unknown,
}

impl LoginCodes {
    /// Issues a new random code at `now`.
    pub(crate) fn issue(&mut self, now: Instant) -> Result<Token, TokenError> {
        let code = Token::generate()?;
        self.forget_expired(now);
        if self.codes.len() >= MAX_LOGIN_CODES {
            self.codes.remove(0);
        }
        self.codes.push((code.clone(), now));
        Ok(code)
    }

    /// Takes `candidate` at `now` if it was issued, is unused and has not
    /// expired; it cannot be taken again.
    pub(crate) fn redeem(
        &mut self,
        candidate: Option<&str>,
        now: Instant,
    ) -> Result<(), LoginRefusal> {
        let candidate = candidate
            .filter(|c| !c.is_empty())
            .ok_or(LoginRefusal::Missing)?;
        self.forget_expired(now);
        let found = self
            .codes
            .iter()
            .position(|(code, _)| code.matches(candidate))
            .ok_or(LoginRefusal::Unknown)?;
        self.codes.remove(found);
        Ok(())
    }

    /// How many codes can still be used.
    #[cfg(test)]
    fn outstanding(&self) -> usize {
        self.codes.len()
    }

    fn forget_expired(&mut self, now: Instant) {
        self.codes
            .retain(|(_, issued)| now.saturating_duration_since(*issued) < LOGIN_CODE_TTL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once() {
        let (mut codes, now) = (LoginCodes::default(), Instant::now());
        let code = codes.issue(now).unwrap();
        assert_eq!(code.as_str().len(), 32);
        assert_eq!(codes.redeem(Some(code.as_str()), now), Ok(()));
        assert_eq!(
            codes.redeem(Some(code.as_str()), now),
            Err(LoginRefusal::Unknown)
        );
        assert_eq!(codes.outstanding(), 0);
    }

    #[test]
    fn a_code_expires_and_unknown_or_missing_ones_are_refused() {
        let (mut codes, now) = (LoginCodes::default(), Instant::now());
        let code = codes.issue(now).unwrap();
        let other = codes.issue(now).unwrap();
        assert_eq!(codes.redeem(Some("0123"), now), Err(LoginRefusal::Unknown));
        assert_eq!(codes.redeem(None, now), Err(LoginRefusal::Missing));
        assert_eq!(codes.redeem(Some(""), now), Err(LoginRefusal::Missing));
        let almost = now + LOGIN_CODE_TTL - Duration::from_millis(1);
        assert_eq!(codes.redeem(Some(other.as_str()), almost), Ok(()));
        let late = now + LOGIN_CODE_TTL;
        assert_eq!(
            codes.redeem(Some(code.as_str()), late),
            Err(LoginRefusal::Unknown)
        );
        let message = LoginRefusal::Unknown.to_string();
        assert!(message.contains("`weir dashboard DIR`"), "{message}");
    }

    #[test]
    fn issuing_past_the_bound_drops_the_oldest_code() {
        let (mut codes, now) = (LoginCodes::default(), Instant::now());
        let first = codes.issue(now).unwrap();
        let rest: Vec<Token> = (1..=MAX_LOGIN_CODES)
            .map(|_| codes.issue(now).unwrap())
            .collect();
        assert_eq!(codes.outstanding(), MAX_LOGIN_CODES);
        assert_eq!(
            codes.redeem(Some(first.as_str()), now),
            Err(LoginRefusal::Unknown)
        );
        assert_eq!(codes.redeem(Some(rest[0].as_str()), now), Ok(()));
    }
}
