//! The dashboard in a real browser: a job started with `weir run` serves its dashboard, headless
//! Chromium loads it, lets its polling script run, and the page it builds must show the job's
//! vertices and the rows of checkpoints the job really completed, with one checkpoint's per-task
//! details opened through `#checkpoint=ID`. The page is opened the way a person opens it: through
//! the one-time login link `weir dashboard` prints (`weir run` prints one on a terminal only,
//! never into a log), which sets the session cookie the page's calls carry
//! and works only once.
//!
//! Chromium comes from `scripts/ensure-chromium.sh` (Debian's `chromium` package), which
//! `scripts/test.sh` runs first. Without a browser the test fails when `CI` is set and is skipped
//! with a loud message otherwise. `WEIR_UPDATE_SCREENSHOTS=1` also writes the screenshots of
//! `docs/OPERATIONS.md` into `docs/images/`.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{
    CLI_TIMEOUT, GeneratorSpec, JobFile, Sandbox, Weir, checkpointed, complete_checkpoint_ids,
    weir_command,
};

/// The browsers tried, in this order, on the `PATH`.
const BROWSERS: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// Virtual time the page gets to run before Chromium dumps or draws it: enough for several of
/// its one-second polls. Virtual time stands still while a request is on its way, so a slow
/// answer does not shorten it.
const VIRTUAL_TIME_BUDGET_MS: u32 = 4_000;

/// The vertices of [`job`], which the page's graph must name.
const VERTICES: [&str; 4] = ["clicks", "views", "count", "out"];

/// Two generators → key-hash → `count` (p=2, two inputs) → forward → exactly-once file sink
/// `out` (p=2); a checkpoint every 200 ms. Unbounded and rate-limited, so it runs, lightly,
/// until the test stops it.
fn job(sandbox: &Sandbox) -> JobFile {
    let generator = |parallelism, seed, rate| GeneratorSpec {
        parallelism,
        seed,
        count: None,
        rate: Some(rate),
        keys: 500,
    };
    let job = JobFile::new("clickcount")
        .generator("clicks", &generator(2, 1, 4_000.0))
        .generator("views", &generator(1, 2, 2_000.0))
        .operator_with_inputs(
            "count",
            weir_tests::guests::COUNT,
            2,
            None,
            &[("clicks", "key-hash"), ("views", "key-hash")],
        )
        .file_sink("out", &sandbox.out_dir(), 2, ("count", "forward"));
    checkpointed(job, sandbox, "200ms", 2)
}

/// A job served: its process, the address of its control endpoint (`http://127.0.0.1:PORT`),
/// its token, and a one-time login link ([`login_link`]).
struct Served {
    weir: Weir,
    address: String,
    token: String,
    login: String,
}

/// Starts the job of [`job`] in `sandbox` and waits for its control endpoint.
fn serve(sandbox: &Sandbox) -> Served {
    job(sandbox).write(&sandbox.job_path());
    let checkpoints = sandbox.checkpoint_dir();
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    let (address, token) = wait_for_control_address(&mut weir, &checkpoints);
    let login = login_link(&mut weir, sandbox, &checkpoints);
    Served {
        weir,
        address,
        token,
        login,
    }
}

/// The one-time link opens the job to whoever holds it: `weir run` prints it on a terminal
/// only, never into a log (a log file of mode 0644 once let another local user log in and cancel
/// the job); `weir dashboard DIR` prints one, which works once.
#[test]
fn the_one_time_dashboard_link_is_never_written_to_the_log() {
    let sandbox = Sandbox::new("dashboard-link");
    let Served {
        weir,
        address,
        login,
        ..
    } = serve(&sandbox);
    assert!(login.starts_with(&address), "{login} is not on {address}");
    let path = &login[address.len()..];
    let first = get(&address, path);
    assert!(
        first.starts_with("HTTP/1.1 303"),
        "the link did not log in:\n{first}"
    );
    let again = get(&address, path);
    assert!(
        again.starts_with("HTTP/1.1 403"),
        "the link worked twice:\n{again}"
    );
    weir.kill();
}

#[test]
fn dashboard_shows_the_graph_and_the_checkpoints_of_a_running_job() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let sandbox = Sandbox::new("dashboard");
    let Served {
        mut weir,
        address,
        token,
        login,
    } = serve(&sandbox);
    let checkpoints = sandbox.checkpoint_dir();
    let mut completed = None;
    let running = weir.wait_until("two completed checkpoints", CLI_TIMEOUT, |_| {
        completed = complete_checkpoint_ids(&checkpoints)
            .last()
            .copied()
            .filter(|&id| id >= 2);
        completed.is_some()
    });
    assert!(
        running,
        "the job ended before two checkpoints completed:\n{}",
        weir.stderr()
    );
    let completed = completed.expect("set when the wait succeeded");

    // The login answers with a cookie and a redirect to `/`, which keeps the `#checkpoint=` part.
    let url = format!("{login}#checkpoint={completed}");
    let dom = Chromium::new(&browser, &sandbox).dump_dom(&url);
    let again = get(&address, &login[address.len()..]);
    assert!(
        again.starts_with("HTTP/1.1 403"),
        "the one-time link worked a second time:\n{again}"
    );

    let rows = attribute_values(&dom, "data-checkpoint-id");
    assert!(
        rows.contains(&completed.to_string()),
        "the history table has no row for checkpoint {completed}, which completed before the \
         page was loaded; rows: {rows:?}\npage:\n{dom}"
    );
    for id in &rows {
        assert!(
            id.parse::<u64>().is_ok_and(|id| id >= 1),
            "a history row with checkpoint id {id:?}"
        );
    }
    let vertices = attribute_values(&dom, "data-vertex");
    for vertex in VERTICES {
        assert!(
            vertices.contains(vertex),
            "the job graph does not show vertex {vertex}; it shows {vertices:?}\npage:\n{dom}"
        );
    }
    assert!(
        dom.contains(r#"data-status="RUNNING""#),
        "the header does not show the job RUNNING\npage:\n{dom}"
    );
    // `#checkpoint=ID` opened that checkpoint's details: one row per task of the job, from
    // GET /api/checkpoints/{id}.
    let details = details_row(&dom, completed)
        .unwrap_or_else(|| panic!("no details row for checkpoint {completed}\npage:\n{dom}"));
    let tasks = attribute_values(details, "data-task");
    let expected: BTreeSet<String> = [
        "clicks#0", "clicks#1", "views#0", "count#0", "count#1", "out#0", "out#1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(
        tasks, expected,
        "the per-task details of checkpoint {completed}"
    );

    if std::env::var_os("WEIR_UPDATE_SCREENSHOTS").is_some() {
        update_screenshots(&browser, &sandbox, &mut weir, &address, &token);
    }

    weir.terminate();
    weir.wait(CLI_TIMEOUT);
}

// ---------------------------------------------------------------------------------------------
// The job's endpoint

/// Waits for the job to publish its control endpoint in `<checkpoints>/_control.json` and
/// returns its address (`http://127.0.0.1:PORT`) and token.
fn wait_for_control_address(weir: &mut Weir, checkpoints: &Path) -> (String, String) {
    let file = checkpoints.join("_control.json");
    let mut address = None;
    let up = weir.wait_until("the control endpoint's _control.json", CLI_TIMEOUT, |_| {
        address = fs::read_to_string(&file)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|json| {
                let address = json.get("address")?.as_str()?.to_string();
                Some((address, json.get("token")?.as_str()?.to_string()))
            });
        address.is_some()
    });
    assert!(
        up,
        "the job ended before it wrote {}:\n{}",
        file.display(),
        weir.stderr()
    );
    let (address, token) = address.expect("set when the wait succeeded");
    (address.trim_end_matches('/').to_string(), token)
}

/// A one-time dashboard link from `weir dashboard CHECKPOINTS`, as a person gets one for a job
/// whose log is not a terminal; checks first that the job's log holds no such link.
pub(crate) fn login_link(weir: &mut Weir, sandbox: &Sandbox, checkpoints: &Path) -> String {
    weir.wait_for_log("`weir dashboard ");
    assert!(
        !weir.stderr().contains("login?once="),
        "a one-time login link in the log, which others may read:\n{}",
        weir.stderr()
    );
    let printed = weir_command(
        sandbox,
        &["dashboard", checkpoints.to_str().unwrap()],
        "",
        &[],
    );
    assert_eq!(printed.code, Some(0), "weir dashboard: {}", printed.stderr);
    let link = printed.stdout.trim().to_string();
    assert!(
        link.contains("/login?once="),
        "weir dashboard printed {link:?}"
    );
    link
}

/// `GET path` (no credentials) to the endpoint at `address`; the whole answer.
fn get(address: &str, path: &str) -> String {
    exchange(
        address,
        &format!("GET {path} HTTP/1.1\r\nHost: {}\r\n", host_of(address)),
    )
}

/// `HOST:PORT` of `http://HOST:PORT`.
fn host_of(address: &str) -> &str {
    address
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("the control address {address} is not http://HOST:PORT"))
}

/// Sends `head` (request line and headers, each ending in CRLF) and no body; the whole answer.
fn exchange(address: &str, head: &str) -> String {
    use std::io::Read;
    let host = host_of(address);
    let mut stream = std::net::TcpStream::connect(host)
        .unwrap_or_else(|e| panic!("cannot connect to the control endpoint {host}: {e}"));
    stream
        .set_read_timeout(Some(CLI_TIMEOUT))
        .expect("a read timeout");
    write!(
        stream,
        "{head}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .expect("sending the request");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .expect("reading the answer");
    answer
}

/// `POST path` with the token to the endpoint at `address` (`http://HOST:PORT`); returns the
/// answer's body, failing unless the status is 200.
fn post(address: &str, token: &str, path: &str) -> String {
    let answer = exchange(
        address,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
             X-Weir-Request: 1\r\n",
            host_of(address)
        ),
    );
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "POST {path} answered:\n{answer}"
    );
    body.to_string()
}

// ---------------------------------------------------------------------------------------------
// The browser

/// The first of [`BROWSERS`] on the `PATH`; `None` (after saying so, loudly) when there is none
/// and `CI` is not set; a failure when `CI` is set, since CI installs one.
pub(crate) fn browser_or_skip() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = BROWSERS.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no chromium, chromium-browser or google-chrome on the PATH; CI must have one: \
             scripts/test.sh installs it with scripts/ensure-chromium.sh"
        );
        // Straight to stderr, not through `eprintln!`, which the test harness captures and
        // shows only for failing tests: a skip must be seen.
        let _ = writeln!(
            std::io::stderr().lock(),
            "\n################################################################################\n\
             SKIPPED the dashboard browser test: no chromium, chromium-browser or google-chrome\n\
             on the PATH. Run scripts/ensure-chromium.sh (as root) to install Debian's chromium.\n\
             ################################################################################\n"
        );
    }
    found
}

/// Headless Chromium with a throw-away profile inside the sandbox.
pub(crate) struct Chromium<'a> {
    browser: &'a Path,
    profile: PathBuf,
    work: &'a Sandbox,
}

impl<'a> Chromium<'a> {
    pub(crate) fn new(browser: &'a Path, sandbox: &'a Sandbox) -> Chromium<'a> {
        let profile = sandbox.join("chromium-profile");
        fs::create_dir_all(&profile).expect("a profile folder for chromium");
        Chromium {
            browser,
            profile,
            work: sandbox,
        }
    }

    /// The page at `url` after its script ran for [`VIRTUAL_TIME_BUDGET_MS`], as HTML.
    pub(crate) fn dump_dom(&self, url: &str) -> String {
        let out = self.work.join("dom.html");
        self.run(&["--dump-dom".to_string()], url, &out);
        fs::read_to_string(&out).expect("chromium's dump of the page")
    }

    /// A PNG of the page at `url` in a window of `width` × `height`, written to `png`.
    fn screenshot(&self, url: &str, width: u32, height: u32, png: &Path) {
        let _ = fs::remove_file(png);
        self.run(
            &[
                format!("--screenshot={}", png.display()),
                format!("--window-size={width},{height}"),
                "--hide-scrollbars".to_string(),
            ],
            url,
            &self.work.join("screenshot.out"),
        );
        assert!(
            png.is_file(),
            "chromium wrote no screenshot to {}",
            png.display()
        );
    }

    /// Runs Chromium on `url` with `extra` flags, its stdout into `stdout`; killed and failed
    /// after [`CLI_TIMEOUT`].
    fn run(&self, extra: &[String], url: &str, stdout: &Path) {
        let stderr = self.work.join("chromium.log");
        let mut child = Command::new(self.browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
            ])
            .arg(format!("--user-data-dir={}", self.profile.display()))
            .arg(format!("--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}"))
            .args(extra)
            .arg(url)
            .stdin(Stdio::null())
            .stdout(fs::File::create(stdout).expect("a file for chromium's output"))
            .stderr(fs::File::create(&stderr).expect("a file for chromium's log"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.browser.display()));
        let deadline = Instant::now() + CLI_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().expect("waiting for chromium") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "chromium did not finish with {url} within {CLI_TIMEOUT:?}; its log:\n{}",
                    fs::read_to_string(&stderr).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            status.success(),
            "chromium failed ({status}) on {url}; its log:\n{}",
            fs::read_to_string(&stderr).unwrap_or_default()
        );
    }
}

/// Writes `docs/images/dashboard.png` (the page as it opens at 1280 × 900) and
/// `docs/images/dashboard-checkpoint.png` (1280 × 1800, the whole page with a savepoint's details open), after
/// letting the job run a few seconds more and taking a savepoint through the endpoint.
fn update_screenshots(
    browser: &Path,
    sandbox: &Sandbox,
    weir: &mut Weir,
    address: &str,
    token: &str,
) {
    let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/images");
    fs::create_dir_all(&images).expect("docs/images");
    // A history worth a chart: some seconds of checkpoints, then a savepoint, then a few more
    // checkpoints (few, so that the savepoint's row is in view without scrolling: headless
    // Chromium draws a scrolled page blank, and its viewport is shorter than its window).
    let until = Instant::now() + Duration::from_secs(5);
    weir.wait_until("five seconds of checkpoints", CLI_TIMEOUT, |_| {
        Instant::now() > until
    });
    let answer = post(address, token, "/api/savepoints");
    let savepoint: serde_json::Value = serde_json::from_str(&answer)
        .unwrap_or_else(|e| panic!("POST /api/savepoints answered {answer:?}: {e}"));
    let savepoint = savepoint["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("POST /api/savepoints answered no id: {answer}"));
    let until = Instant::now() + Duration::from_millis(400);
    weir.wait_until("a few more checkpoints", CLI_TIMEOUT, |_| {
        Instant::now() > until
    });
    // A fresh one-time link for each browser run (each starts without the last one's cookie).
    let login = || {
        let answer = post(address, token, "/api/dashboard-login");
        let link: serde_json::Value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("POST /api/dashboard-login answered {answer:?}: {e}"));
        link["url"].as_str().expect("a link").to_string()
    };
    let chromium = Chromium::new(browser, sandbox);
    let overview = images.join("dashboard.png");
    chromium.screenshot(&login(), 1280, 900, &overview);
    let details = images.join("dashboard-checkpoint.png");
    chromium.screenshot(
        &format!("{}#checkpoint={savepoint}", login()),
        1280,
        1800,
        &details,
    );
    eprintln!("wrote {} and {}", overview.display(), details.display());
}

// ---------------------------------------------------------------------------------------------
// Reading the page

/// Every value of the attribute `name` (`name="value"`) in `html`.
pub(crate) fn attribute_values(html: &str, name: &str) -> BTreeSet<String> {
    let needle = format!("{name}=\"");
    html.match_indices(&needle)
        .filter_map(|(at, _)| {
            let rest = &html[at + needle.len()..];
            rest.find('"').map(|end| rest[..end].to_string())
        })
        .collect()
}

/// The HTML of the details row of checkpoint `id` (`<tr … data-details-for="ID">…</tr>`).
fn details_row(html: &str, id: u64) -> Option<&str> {
    let start = html.find(&format!("data-details-for=\"{id}\""))?;
    let rest = &html[start..];
    // The details row holds a table of its own: its end is the first `</tr>` after that
    // table's end.
    let inner_end = rest.find("</table>").map_or(0, |i| i + "</table>".len());
    let end = rest[inner_end..].find("</tr>")? + inner_end;
    Some(&rest[..end])
}
