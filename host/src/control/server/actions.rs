//! The actions of the control endpoint: the dashboard's one-time login, savepoints (with or
//! without a stop), a rescale, a cancel.
//!
//! Why a file of its own: an action is the one kind of request that changes the job; each
//! checks that the job can take it, sends it to the driver as a [`JobRequest`] and waits for
//! the answer within a bound, while routing and the checks every request passes stay in
//! `server.rs`.

use super::*;

/// How long a rescale waits, past its savepoint, for the job to run again: the restore reads
/// the savepoint and splits its state.
const RESTORE_MARGIN: Duration = Duration::from_secs(120);

/// A new login code of `codes`, as a link under `base` (`http://HOST:PORT`).
pub(super) fn issue_login_url(codes: &Mutex<LoginCodes>, base: &str) -> Result<String, TokenError> {
    let code = lock(codes).issue(Instant::now())?;
    Ok(format!("{base}/login?once={}", code.as_str()))
}

/// A savepoint counted by [`SavepointLimit`]: finished when dropped, also
/// when the client goes away and its request is abandoned.
struct LimitPermit<'a>(&'a Mutex<SavepointLimit>);

impl Drop for LimitPermit<'_> {
    fn drop(&mut self) {
        lock(self.0).finish();
    }
}

/// `GET /login?once=CODE`: a valid one-time code is answered with the
/// session cookie and a redirect to the dashboard, whose address then holds
/// no secret.
pub(super) fn login(state: &State, query: Option<&str>) -> Answer {
    let code = query.and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("once=")));
    if let Err(refused) = lock(&state.login).redeem(code, Instant::now()) {
        return error(StatusCode::FORBIDDEN, refused.to_string());
    }
    let mut answer = text(
        StatusCode::SEE_OTHER,
        "text/plain; charset=utf-8",
        "logged in: the dashboard is at /\n".to_string(),
    );
    let cookie = format!(
        "{}={}; HttpOnly; SameSite=Strict; Path=/",
        state.cookie_name,
        state.session.as_str()
    );
    let headers = answer.headers_mut();
    headers.insert(header::LOCATION, HeaderValue::from_static("/"));
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    answer
}

/// `409 Conflict` when the job is not running; `why` says why the request needs it running.
fn not_running(target: &ControlTarget, why: &str) -> Option<Answer> {
    let status = target.monitor.status();
    (status != JobStatus::Running).then(|| {
        error(
            StatusCode::CONFLICT,
            format!("the job is {status}, not RUNNING: {why}"),
        )
    })
}

/// Sends `request` to the job; `409 Conflict` when it has ended, with nothing left to `what`.
fn unsent(target: &ControlTarget, request: JobRequest, what: &str) -> Option<Answer> {
    target.requests.send(request).is_err().then(|| {
        error(
            StatusCode::CONFLICT,
            format!("the job has ended: there is nothing to {what}"),
        )
    })
}

/// `POST /api/savepoints` (`stop = false`, bounded by [`SavepointLimit`])
/// and `POST /api/stop`.
pub(super) async fn savepoint(state: &State, stop: bool) -> Answer {
    let target = &state.target;
    if let Some(refused) = not_running(target, "savepoints are taken of a running job") {
        return refused;
    }
    // Held until the answer (or until the request is abandoned).
    let _permit = if stop {
        None
    } else {
        let started = lock(&state.savepoints).try_start(Instant::now());
        match started {
            Ok(()) => Some(LimitPermit(&state.savepoints)),
            Err(refused) => return too_many(&refused),
        }
    };
    let (request, answer) = JobRequest::savepoint(stop);
    if let Some(ended) = unsent(target, request, "take a savepoint of") {
        return ended;
    }
    let bound = target.job.checkpoint.timeout + SAVEPOINT_MARGIN;
    match tokio::time::timeout(bound, answer).await {
        Ok(Ok(Ok(taken))) => json(
            StatusCode::OK,
            &SavepointView::new(taken.id, &absolute(&taken.path)),
        ),
        Ok(Ok(Err(refused @ SavepointError::Refused(_)))) => {
            error(StatusCode::CONFLICT, refused.to_string())
        }
        Ok(Ok(Err(failed @ SavepointError::Failed { .. }))) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{failed}; the job goes on: try again, or see /api/checkpoints"),
        ),
        Ok(Err(_)) => error(
            StatusCode::CONFLICT,
            "the job ended before it took the savepoint".into(),
        ),
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "no answer within {} s (the checkpoint timeout and a margin): the savepoint may \
                 still complete; see /api/checkpoints",
                bound.as_secs()
            ),
        ),
    }
}

/// `POST /api/rescale?VERTEX=N&…` (bounded by [`SavepointLimit`] like a savepoint): a
/// savepoint, then the job goes on at the new parallelisms from it; answered once it runs
/// again, or with why it does not.
pub(super) async fn rescale(state: &State, query: Option<&str>) -> Answer {
    let target = &state.target;
    let parallelism = match rescale_query(query) {
        Ok(parallelism) => parallelism,
        Err(problem) => return error(StatusCode::BAD_REQUEST, problem),
    };
    if let Some(refused) = not_running(target, "only a running job is rescaled") {
        return refused;
    }
    // A rescale takes a savepoint (never pruned), so it is bounded with them: a loop of
    // rescales would otherwise fill the disk as a loop of savepoints once did.
    let _permit = match lock(&state.savepoints).try_start(Instant::now()) {
        Ok(()) => LimitPermit(&state.savepoints),
        Err(refused) => return too_many(&refused),
    };
    let (request, answer) = JobRequest::rescale(parallelism);
    if let Some(ended) = unsent(target, request, "rescale") {
        return ended;
    }
    let bound = target.job.checkpoint.timeout + SAVEPOINT_MARGIN + RESTORE_MARGIN;
    match tokio::time::timeout(bound, answer).await {
        Ok(Ok(Ok(rescaled))) => json(
            StatusCode::OK,
            &RescaleView {
                savepoint: SavepointView::new(
                    rescaled.savepoint.id,
                    &absolute(&rescaled.savepoint.path),
                ),
                changes: rescaled
                    .changes
                    .into_iter()
                    .map(|(vertex, from, to)| ParallelismChange { vertex, from, to })
                    .collect(),
            },
        ),
        Ok(Ok(Err(failed @ RescaleError::Savepoint(SavepointError::Failed { .. })))) => {
            error(StatusCode::INTERNAL_SERVER_ERROR, failed.to_string())
        }
        Ok(Ok(Err(refused))) => error(StatusCode::CONFLICT, refused.to_string()),
        Ok(Err(_)) => error(
            StatusCode::CONFLICT,
            "the job ended before it was rescaled".into(),
        ),
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "no answer within {} s: the rescale may still complete; see /api/job",
                bound.as_secs()
            ),
        ),
    }
}

/// The parallelisms of `VERTEX=N&…`, or what is wrong with them.
fn rescale_query(query: Option<&str>) -> Result<BTreeMap<String, u32>, String> {
    const FORM: &str = "name each vertex and its new parallelism: /api/rescale?count=3";
    let mut parallelism = BTreeMap::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let Some((vertex, number)) = pair.split_once('=') else {
            return Err(format!("`{pair}` is not VERTEX=N: {FORM}"));
        };
        let Ok(number) = number.parse::<u32>() else {
            return Err(format!(
                "`{number}` is not a parallelism (a whole number from 1): {FORM}"
            ));
        };
        if parallelism.insert(vertex.to_string(), number).is_some() {
            return Err(format!("`{vertex}` is named twice: {FORM}"));
        }
    }
    if parallelism.is_empty() {
        return Err(format!("no vertex named: {FORM}"));
    }
    Ok(parallelism)
}

/// `POST /api/cancel`.
pub(super) fn cancel(target: &ControlTarget) -> Answer {
    let status = target.monitor.status();
    if status.is_terminal() {
        return error(
            StatusCode::CONFLICT,
            format!("the job has already ended: it is {status}"),
        );
    }
    if target.requests.send(JobRequest::Cancel).is_err() {
        return error(StatusCode::CONFLICT, "the job has already ended".into());
    }
    json(
        StatusCode::ACCEPTED,
        &CancelView {
            status: "CANCELING",
        },
    )
}
