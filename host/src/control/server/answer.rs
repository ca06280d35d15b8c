//! The answers the control endpoint sends: JSON bodies, errors as `{"error": …}`, the
//! refusals of the guards and the savepoint bound, every answer with the headers that keep it
//! from being cached, framed or sniffed.
//!
//! Why a file of its own: every route and action answers through these few functions, so the
//! headers every answer must carry are written once.

use super::*;

/// What a request is answered with.
pub(super) type Answer = Response<Full<Bytes>>;

pub(super) fn wrong_method(path: &str, allowed: &'static str) -> Answer {
    let mut answer = error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{path} takes {allowed} only"),
    );
    answer
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allowed));
    answer
}

/// 429 for a savepoint over the bound, with `Retry-After`.
pub(super) fn too_many(refused: &LimitRefusal) -> Answer {
    let mut answer = error(StatusCode::TOO_MANY_REQUESTS, refused.to_string());
    answer.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(refused.retry_after_secs()),
    );
    answer
}

/// The answer to a request refused by [`guard`].
pub(super) fn refusal(refused: &Refusal) -> Answer {
    let status = StatusCode::from_u16(refused.status()).unwrap_or(StatusCode::FORBIDDEN);
    error(status, refused.to_string())
}

pub(super) fn error(status: StatusCode, message: String) -> Answer {
    json(status, &ErrorView { error: message })
}

pub(super) fn json(status: StatusCode, body: &impl Serialize) -> Answer {
    let body = serde_json::to_string(body).unwrap_or_else(|e| {
        serde_json::json!({ "error": format!("cannot write the answer as JSON: {e}") }).to_string()
    });
    text(status, "application/json", body)
}

pub(super) fn text(status: StatusCode, content_type: &'static str, body: String) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::from(body)));
    *answer.status_mut() = status;
    let headers = answer.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Nothing here may be cached, nor leak the page's address to another site, nor be
    // framed by another page (clickjacking the dashboard's buttons).
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    answer
}
