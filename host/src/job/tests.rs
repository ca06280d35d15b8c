//! Job file → job graph: the shipped example, defaults, round trip, the
//! fingerprint, and every validation error with its exact line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::checkpoint::config::{CheckpointConfig, CheckpointMode, Retention};
use crate::ids::TaskId;
use crate::wasm::GuestLimits;

fn parse(text: &str) -> Result<Job, JobError> {
    Job::from_str(text, "/jobs", "test.toml")
}

fn job(text: &str) -> Job {
    parse(text).unwrap_or_else(|e| panic!("{e}"))
}

/// The line and the problem of a validation error.
#[track_caller]
fn invalid(text: &str) -> (usize, Problem) {
    match parse(text) {
        Err(JobError::Invalid { at, problem }) => (at.line, *problem),
        other => panic!("expected a validation error, got {other:?}"),
    }
}

/// The line and the message of a parser error.
#[track_caller]
fn syntax(text: &str) -> (usize, String) {
    match parse(text) {
        Err(JobError::Syntax { at, message }) => (at.line, message),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

/// Fails unless `text` is refused at `line` for the value `found` of `key`.
#[track_caller]
fn assert_bad_value(text: &str, line: usize, key: &str, found: &str) {
    assert_eq!(bad_value(text), (line, key.to_owned(), found.to_owned()));
}

/// The line, key and found value of a bad-value error.
#[track_caller]
fn bad_value(text: &str) -> (usize, String, String) {
    match invalid(text) {
        (line, Problem::BadValue { key, found, .. }) => (line, key, found),
        other => panic!("expected a bad value, got {other:?}"),
    }
}

/// The smallest valid job: generator → blackhole.
const MINIMAL: &str = r#"name = "t"
[[source]]
name = "in"
type = "generator"
[[sink]]
name = "out"
type = "blackhole"
inputs = ["in"]
"#;

/// A job with every key set, none at its default.
const COMPLETE: &str = r#"name = "complete"
max_parallelism = 64

[checkpoint]
interval = "250ms"
mode = "at-least-once"
min_pause = "100ms"
timeout = "2m"
max_concurrent = 2
on_cancel = "delete"
directory = "state/complete"
retained = 5
tolerable_failures = 3

[restart]
strategy = "exponential-delay"
initial = "100ms"
max = "10s"
multiplier = 1.5
attempts = 7

[limits]
max_memory = "128MiB"
call_timeout = "5s"
max_output = "8MB"
max_state = "2GiB"

[[source]]
name = "lines"
type = "file"
path = "in.txt"
follow = true

[[source]]
name = "numbers"
type = "generator"
seed = 42
count = 100000
rate = 5000.5
keys = 17
value_size = 64
parallelism = 3

[[operator]]
name = "split"
module = "split.wasm"
config = "lowercase=true"
inputs = ["lines"]

[[operator]]
name = "join"
module = "/opt/weir/join.wasm"
parallelism = 4
inputs = [{ from = "split", partition = "key-hash" }, { from = "numbers", partition = "broadcast" }]
limits = { call_timeout = "1s", max_state = "16MiB" }
checkpoint = "image"

[[sink]]
name = "files"
type = "file"
path = "out"
parallelism = 4
inputs = [{ from = "join" }]

[[sink]]
name = "console"
type = "stdout"
inputs = [{ from = "join", partition = "rebalance" }, { from = "split", partition = "broadcast" }]

[control]
enabled = false
address = "0.0.0.0:9250"
"#;

/// [`MINIMAL`] with the table `[name]` holding `keys` (TOML lines), before its source.
fn with_table(name: &str, keys: &str) -> String {
    MINIMAL.replace("[[source]]", &format!("[{name}]\n{keys}\n[[source]]"))
}

fn wordcount_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/jobs/wordcount.toml")
}

/// A job with `line` fields zeroed, to compare jobs read from different texts.
fn without_lines(mut job: Job) -> Job {
    for vertex in &mut job.vertices {
        vertex.line = 0;
        if let VertexKind::Operator(operator) = &mut vertex.kind {
            operator.module_line = 0;
        }
    }
    job
}

fn edge(from: &str, to: &str, port: u32, partitioner: Partitioner) -> Edge {
    Edge {
        from: from.into(),
        to: to.into(),
        port,
        partitioner,
        output: None,
    }
}

// ---- the shipped example -------------------------------------------------

#[test]
fn shipped_wordcount_job_parses_into_the_documented_graph() {
    let path = wordcount_path();
    let job = Job::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let folder = path.parent().unwrap();

    assert_eq!(job.name, "wordcount");
    assert_eq!(job.base_dir, folder);
    let names: Vec<_> = job
        .vertices
        .iter()
        .map(|v| (v.name.as_str(), v.kind_name(), v.parallelism))
        .collect();
    assert_eq!(
        names,
        [
            ("lines", "source", 1),
            ("split", "operator", 1),
            ("count", "operator", 2),
            ("out", "sink", 2)
        ]
    );
    assert_eq!(
        job.edges,
        [
            edge("lines", "split", 0, Partitioner::Forward),
            edge("split", "count", 0, Partitioner::KeyHash),
            edge("count", "out", 0, Partitioner::Forward),
        ]
    );
    let VertexKind::Source(SourceKind::File {
        path: input,
        follow: false,
        format: FileFormat::Lines,
        on_error: OnError::Fail,
    }) = &job.vertex("lines").unwrap().kind
    else {
        panic!("lines is not a file source")
    };
    assert!(
        input.is_file(),
        "{} ships with the repository",
        input.display()
    );
    for (name, file) in [
        ("split", "weir_example_split.wasm"),
        ("count", "weir_example_count.wasm"),
    ] {
        let module = &job.vertex(name).unwrap().operator().unwrap().module;
        assert_eq!(
            module,
            &folder
                .join("../../target/wasm32-unknown-unknown/release")
                .join(file)
        );
    }
    assert!(matches!(
        job.vertex("out").unwrap().kind,
        VertexKind::Sink(SinkKind::File { .. })
    ));

    let checkpoint = &job.checkpoint;
    assert_eq!(checkpoint.interval, Some(Duration::from_secs(1)));
    assert_eq!(checkpoint.mode, CheckpointMode::ExactlyOnce);
    assert_eq!(checkpoint.on_cancel, Retention::RetainOnCancel);
    assert_eq!(checkpoint.directory, folder.join("checkpoints/wordcount"));
    assert_eq!(
        job.restart,
        RestartStrategy::FixedDelay {
            attempts: 3,
            delay: Duration::from_secs(1)
        }
    );
    assert_eq!(job.tasks().count(), 6);
    assert_eq!(
        job.source_tasks().collect::<Vec<_>>(),
        [TaskId::new("lines", 0)]
    );
}

// ---- defaults ------------------------------------------------------------

#[test]
fn absent_tables_and_keys_take_their_defaults() {
    let job = job(MINIMAL);
    assert_eq!(
        job.checkpoint,
        CheckpointConfig::new(PathBuf::from("/jobs/checkpoints/t"))
    );
    assert_eq!(job.checkpoint.interval, None);
    assert_eq!(
        job.restart,
        RestartStrategy::None,
        "no checkpoints, nothing to restart from"
    );
    assert_eq!(job.limits, GuestLimits::default());
    assert_eq!(job.vertices[0].parallelism, 1);
    assert_eq!(
        job.vertices[0].kind,
        VertexKind::Source(SourceKind::Generator(GeneratorSettings {
            seed: 0,
            count: None,
            rate: None,
            keys: 1_000,
            value_size: 16,
            values: GeneratorValues::Letters,
            disorder: 0,
        }))
    );
    assert_eq!(job.edges, [edge("in", "out", 0, Partitioner::Forward)]);
}

#[test]
fn default_limits_are_those_of_the_abi() {
    let limits = GuestLimits::default();
    assert_eq!(limits.max_memory_bytes, 256 * 1024 * 1024);
    assert_eq!(limits.call_timeout, Duration::from_secs(10));
    assert_eq!(limits.max_output_bytes, 64 * 1024 * 1024);
    assert_eq!(limits.max_state_bytes, 1024 * 1024 * 1024);
}

#[test]
fn restart_defaults_to_fixed_delay_when_checkpoints_are_on() {
    let text = with_table("checkpoint", "interval = \"5s\"");
    assert_eq!(job(&text).restart, RestartStrategy::DEFAULT_FIXED_DELAY);
}

#[test]
fn interval_off_disables_periodic_checkpoints() {
    let text = with_table("checkpoint", "interval = \"off\"");
    assert_eq!(job(&text).checkpoint.interval, None);
}

#[test]
fn strategy_keys_default_when_absent() {
    let fixed = with_restart("strategy = \"fixed-delay\"");
    assert_eq!(job(&fixed).restart, RestartStrategy::DEFAULT_FIXED_DELAY);
    let exponential = with_restart("strategy = \"exponential-delay\"");
    assert_eq!(
        job(&exponential).restart,
        RestartStrategy::ExponentialDelay {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            multiplier: 2.0,
            attempts: None
        }
    );
}

#[test]
fn shorthand_input_is_rebalance_between_different_parallelisms() {
    let text = MINIMAL.replace(
        "type = \"blackhole\"",
        "type = \"blackhole\"\nparallelism = 3",
    );
    assert_eq!(
        job(&text).edges,
        [edge("in", "out", 0, Partitioner::Rebalance)]
    );
}

// ---- a complete job ------------------------------------------------------

#[test]
fn complete_job_reads_every_key() {
    let job = job(COMPLETE);
    assert_eq!(job.max_parallelism, Some(64));
    assert!(job.vertices.iter().all(|v| v.max_parallelism == 64));
    assert_eq!(
        job.checkpoint,
        CheckpointConfig {
            interval: Some(Duration::from_millis(250)),
            mode: CheckpointMode::AtLeastOnce,
            min_pause: Duration::from_millis(100),
            timeout: Duration::from_secs(120),
            max_concurrent: 2,
            on_cancel: Retention::DeleteOnCancel,
            directory: PathBuf::from("/jobs/state/complete"),
            object_store: None,
            object_store_options: Default::default(),
            retained: 5,
            tolerable_failures: 3,
        }
    );
    assert_eq!(
        job.restart,
        RestartStrategy::ExponentialDelay {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
            multiplier: 1.5,
            attempts: Some(7),
        }
    );
    let job_limits = GuestLimits {
        max_memory_bytes: 128 << 20,
        call_timeout: Duration::from_secs(5),
        max_output_bytes: 8_000_000,
        max_state_bytes: 2 << 30,
        max_timer_bytes: 256 << 20,
    };
    assert_eq!(job.limits, job_limits);

    let order: Vec<_> = job.vertices.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        order,
        ["lines", "numbers", "split", "join", "files", "console"]
    );
    assert_eq!(
        job.vertex("lines").unwrap().kind,
        VertexKind::Source(SourceKind::File {
            path: "/jobs/in.txt".into(),
            follow: true,
            format: FileFormat::Lines,
            on_error: OnError::Fail,
        })
    );
    assert_eq!(
        job.vertex("numbers").unwrap().kind,
        VertexKind::Source(SourceKind::Generator(GeneratorSettings {
            seed: 42,
            count: Some(100_000),
            rate: Some(5000.5),
            keys: 17,
            value_size: 64,
            values: GeneratorValues::Letters,
            disorder: 0,
        }))
    );
    let split = job.vertex("split").unwrap();
    assert_eq!(split.line, 45);
    assert_eq!(
        split.operator().unwrap(),
        &Operator {
            module: "/jobs/split.wasm".into(),
            module_line: 46,
            config: b"lowercase=true".to_vec(),
            limits: job_limits,
            state_capture: StateCapture::Auto,
            image_full_every: 10,
        }
    );
    let join = job.vertex("join").unwrap().operator().unwrap();
    assert_eq!(
        join.module,
        PathBuf::from("/opt/weir/join.wasm"),
        "absolute paths stay as they are"
    );
    assert_eq!(join.config, b"");
    assert_eq!(
        join.limits,
        GuestLimits {
            call_timeout: Duration::from_secs(1),
            max_state_bytes: 16 << 20,
            ..job_limits
        },
        "an operator's limits override the job's key by key"
    );
    assert_eq!(
        job.vertex("files").unwrap().kind,
        VertexKind::Sink(SinkKind::File {
            directory: "/jobs/out".into()
        })
    );
    assert_eq!(
        job.vertex("console").unwrap().kind,
        VertexKind::Sink(SinkKind::Stdout)
    );
    assert_eq!(
        job.edges,
        [
            edge("lines", "split", 0, Partitioner::Forward),
            edge("split", "join", 0, Partitioner::KeyHash),
            edge("numbers", "join", 1, Partitioner::Broadcast),
            edge("join", "files", 0, Partitioner::Forward),
            edge("join", "console", 0, Partitioner::Rebalance),
            edge("split", "console", 1, Partitioner::Broadcast),
        ]
    );
    assert_eq!(
        job.inputs_of("join")
            .map(|e| e.from.as_str())
            .collect::<Vec<_>>(),
        ["split", "numbers"]
    );
    assert_eq!(job.outputs_of("split").count(), 2);
    assert_eq!(
        job.outputs_of("join")
            .map(|e| e.to.as_str())
            .collect::<Vec<_>>(),
        ["files", "console"]
    );
    assert_eq!(job.sources().count(), 2);
    assert_eq!(job.operators().count(), 2);
    assert_eq!(job.sinks().count(), 2);
    assert_eq!(job.tasks().count(), 1 + 3 + 1 + 4 + 4 + 1);
}

#[test]
fn complete_job_reads_the_control_table() {
    assert_eq!(
        job(COMPLETE).control,
        crate::job::ControlConfig {
            enabled: false,
            address: "0.0.0.0:9250".parse().unwrap(),
        }
    );
}

#[test]
fn control_defaults_to_on_and_loopback_with_a_port_the_system_picks() {
    let control = job(MINIMAL).control;
    assert!(control.enabled);
    assert_eq!(control.address.to_string(), "127.0.0.1:0");
    let control = job(&format!(
        "{MINIMAL}[control]\naddress = \"localhost:8081\"\n"
    ))
    .control;
    assert_eq!(control.address.to_string(), "127.0.0.1:8081");
    assert!(
        !job(MINIMAL).to_toml().contains("[control]"),
        "the default is not written"
    );
}

#[test]
fn an_operator_says_how_its_state_is_checkpointed() {
    let complete = job(COMPLETE);
    let join = complete.vertex("join").unwrap().operator().unwrap();
    assert_eq!(join.state_capture, StateCapture::Image);
    assert!(complete.to_toml().contains("checkpoint = \"image\""));
    let operator = |value: &str| {
        format!(
            "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
             [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"op\"]\n\
             [[operator]]\nname = \"op\"\nmodule = \"op.wasm\"\ninputs = [\"in\"]\n{value}"
        )
    };
    let default = job(&operator(""));
    assert_eq!(
        default
            .vertex("op")
            .unwrap()
            .operator()
            .unwrap()
            .state_capture,
        StateCapture::Auto
    );
    assert!(
        !default.to_toml().contains("checkpoint ="),
        "the default is not written"
    );
    let exports = job(&operator("checkpoint = \"exports\"\n"));
    assert_eq!(
        exports
            .vertex("op")
            .unwrap()
            .operator()
            .unwrap()
            .state_capture,
        StateCapture::Exports
    );
    let text = operator("checkpoint = \"memory\"\n");
    let (line, key, was) = bad_value(&text);
    assert_eq!(
        (line, key.as_str(), was.as_str()),
        (13, "`checkpoint` of operator \"op\"", "\"memory\"")
    );
    let message = parse(&text).unwrap_err().to_string();
    assert!(message.contains("\"exports\""), "{message}");
    assert!(message.contains("\"image\""), "{message}");
    assert!(message.contains("\"auto\""), "{message}");
}

#[test]
fn an_operator_says_how_often_its_image_is_full() {
    let operator = |value: &str| {
        format!(
            "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
             [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"op\"]\n\
             [[operator]]\nname = \"op\"\nmodule = \"op.wasm\"\ninputs = [\"in\"]\n{value}"
        )
    };
    let full_every = |job: &Job| {
        job.vertex("op")
            .unwrap()
            .operator()
            .unwrap()
            .image_full_every
    };
    let default = job(&operator(""));
    assert_eq!(full_every(&default), 10);
    assert!(!default.to_toml().contains("image_full_every"));
    for n in [1, 4] {
        let set = job(&operator(&format!("image_full_every = {n}\n")));
        assert_eq!(full_every(&set), n);
        assert!(set.to_toml().contains(&format!("image_full_every = {n}")));
        assert_eq!(full_every(&job(&set.to_toml())), n, "round trip");
    }
    let text = operator("image_full_every = 0\n");
    let (line, key, was) = bad_value(&text);
    assert_eq!(
        (line, key.as_str(), was.as_str()),
        (13, "`image_full_every` of operator \"op\"", "0")
    );
    let message = parse(&text).unwrap_err().to_string();
    assert!(message.contains("1 = every image full"), "{message}");
}

#[test]
fn the_state_table_sets_the_stores_memory_and_folder_and_is_written_back() {
    let default = job(MINIMAL);
    assert_eq!(default.state, crate::job::StateConfig::default());
    assert_eq!(default.state.memory, 512 << 20);
    assert!(
        !default.to_toml().contains("[state]"),
        "the default is not written"
    );
    let set = job(&format!(
        "{MINIMAL}[state]\nmemory = \"2GiB\"\ndirectory = \"state\"\n"
    ));
    assert_eq!(set.state.memory, 2 << 30);
    assert_eq!(set.state.directory, Some(set.base_dir.join("state")));
    assert_eq!(
        set.state.work_dir("minimal", 7),
        set.base_dir.join("state").join("weir-state-minimal-7")
    );
    let again = job(&set.to_toml());
    assert_eq!(again.state, set.state);
}

#[test]
fn the_state_table_refuses_a_memory_out_of_range_and_an_object_store() {
    for (memory, expected) in [
        ("1MiB", "a size of at least 16MiB"),
        ("2048GiB", "the stores' memory is at most 1TiB"),
        ("lots", "an integer and a unit"),
    ] {
        let text = format!("{MINIMAL}[state]\nmemory = \"{memory}\"\n");
        let message = parse(&text).unwrap_err().to_string();
        assert!(
            message.contains("`state.memory`") && message.contains(expected),
            "{memory}: {message}"
        );
    }
    let text = format!("{MINIMAL}[state]\ndirectory = \"s3://bucket/state\"\n");
    let (line, key, _) = bad_value(&text);
    assert_eq!((line, key.as_str()), (10, "`state.directory`"));
    let message = parse(&text).unwrap_err().to_string();
    assert!(message.contains("a local directory"), "{message}");
}

#[test]
fn control_address_must_be_an_ip_address_and_port() {
    for (address, found) in [
        ("example.com:80", "\"example.com:80\""),
        ("8081", "\"8081\""),
        ("127.0.0.1:70000", "\"127.0.0.1:70000\""),
    ] {
        let text = format!("{MINIMAL}[control]\naddress = \"{address}\"\n");
        let (line, key, was) = bad_value(&text);
        assert_eq!(
            (line, key.as_str(), was.as_str()),
            (10, "`control.address`", found)
        );
        let message = parse(&text).unwrap_err().to_string();
        assert!(
            message.contains("expected an IP address and a port, \"host:port\""),
            "{message}"
        );
    }
    let (line, message) = syntax(&format!("{MINIMAL}[control]\nport = 80\n"));
    assert_eq!(line, 10);
    assert!(message.contains("unknown field `port`"), "{message}");
    let (_, message) = syntax(&format!("{MINIMAL}[control]\nenabled = \"yes\"\n"));
    assert!(message.contains("expected a boolean"), "{message}");
}

#[test]
fn complete_job_round_trips_through_toml() {
    let original = job(COMPLETE);
    let written = original.to_toml();
    let reread = parse(&written).unwrap_or_else(|e| panic!("{e}\n{written}"));
    assert_eq!(
        without_lines(reread.clone()),
        without_lines(original.clone()),
        "{written}"
    );
    assert_eq!(reread.fingerprint(), original.fingerprint());
    assert_eq!(reread.to_toml(), written, "writing is deterministic");
}

#[test]
fn minimal_and_wordcount_jobs_round_trip_through_toml() {
    for original in [job(MINIMAL), Job::from_file(wordcount_path()).unwrap()] {
        let written = original.to_toml();
        let reread = Job::from_str(&written, &original.base_dir, "rewritten.toml")
            .unwrap_or_else(|e| panic!("{e}\n{written}"));
        assert_eq!(
            without_lines(reread),
            without_lines(Job {
                file: "rewritten.toml".into(),
                ..original
            })
        );
    }
}

// ---- fingerprint ---------------------------------------------------------

#[test]
fn fingerprint_is_pinned_for_a_known_graph() {
    // Changing this constant breaks matching every existing checkpoint to its
    // job: bump the fingerprint format instead, and document it.
    assert_eq!(job(MINIMAL).fingerprint(), 0xba93_7137_a145_7ec1);
}

#[test]
fn fingerprint_ignores_table_order_and_settings() {
    let reference = job(COMPLETE).fingerprint();
    // Moving the `console` sink before `files` changes file order, not shape.
    let (head, sinks) = COMPLETE.split_at(COMPLETE.find("[[sink]]").unwrap());
    let (files, console) = sinks.split_at(sinks.rfind("[[sink]]").unwrap());
    let swapped = format!("{head}{console}\n{files}");
    assert_eq!(job(&swapped).fingerprint(), reference);

    let other_settings = COMPLETE
        .replace("split.wasm", "split-v2.wasm")
        .replace("lowercase=true", "lowercase=false")
        .replace("interval = \"250ms\"", "interval = \"1s\"")
        .replace("call_timeout = \"1s\"", "call_timeout = \"2s\"");
    assert_eq!(job(&other_settings).fingerprint(), reference);
}

#[test]
fn fingerprint_changes_with_the_shape() {
    let reference = job(COMPLETE).fingerprint();
    let changes = [
        COMPLETE.replace("parallelism = 3", "parallelism = 2"),
        COMPLETE.replace("partition = \"key-hash\"", "partition = \"rebalance\""),
        COMPLETE.replace("type = \"stdout\"", "type = \"blackhole\""),
        COMPLETE.replace("\"console\"", "\"screen\""),
        COMPLETE.replace(
            "inputs = [{ from = \"split\", partition = \"key-hash\" }, { from = \"numbers\", partition = \"broadcast\" }]",
            "inputs = [{ from = \"numbers\", partition = \"broadcast\" }, { from = \"split\", partition = \"key-hash\" }]",
        ),
    ];
    for text in &changes {
        assert_ne!(job(text).fingerprint(), reference, "{text}");
    }
}

// ---- errors: syntax, keys and types --------------------------------------

#[test]
fn unknown_key_is_named_with_its_line_and_the_allowed_keys() {
    let text = generator_with("sede = 1");
    let (line, message) = syntax(&text);
    assert_eq!(line, 5);
    assert!(
        message.contains("unknown field `sede`") && message.contains("`seed`"),
        "{message}"
    );
}

#[test]
fn wrong_type_names_the_key_and_the_expected_type() {
    let text = MINIMAL.replace(
        "type = \"blackhole\"",
        "type = \"blackhole\"\nparallelism = \"two\"",
    );
    assert_eq!(
        syntax(&text),
        (
            8,
            "`parallelism`: invalid type: string \"two\", expected u32".into()
        )
    );
}

#[test]
fn negative_count_is_a_syntax_error_on_its_line() {
    let text = with_table("checkpoint", "max_concurrent = -1");
    let (line, message) = syntax(&text);
    assert_eq!(line, 3);
    assert!(
        message.starts_with("`max_concurrent`: invalid value"),
        "{message}"
    );
}

#[test]
fn malformed_toml_is_reported_at_its_position() {
    let err = parse("name = \"t\"\n[[source]\n").unwrap_err();
    assert_eq!(err.line(), Some(2));
    assert!(err.to_string().starts_with("test.toml:2:"), "{err}");
    assert_eq!(
        syntax("name = \"t\"\nname = \"u\"\n"),
        (2, "`name`: duplicate key".into())
    );
}

#[test]
fn syntax_error_after_a_non_ascii_character_is_reported() {
    // Found by fuzzing (fuzz/regressions/job_file/): looking for the key before the error
    // sliced the line inside a multi-byte character, and panicked.
    let (line, message) = syntax("\"\u{fffd}name =");
    assert_eq!(line, 1);
    assert!(message.starts_with("`name`: "), "{message}");
    // Keys are ASCII: a quoted non-ASCII one is not named, the parser's message stays as is.
    let (line, message) = syntax("x = 1\n\"é\" = @\n");
    assert_eq!(line, 2);
    assert!(!message.starts_with('`'), "{message}");
}

#[test]
fn input_table_with_unknown_key_is_refused() {
    let text = MINIMAL.replace("inputs = [\"in\"]", "inputs = [{ form = \"in\" }]");
    let (line, message) = syntax(&text);
    assert_eq!(line, 8);
    assert_eq!(
        message,
        "unknown field `form`, expected one of `from`, `partition`, `output`"
    );
}

#[test]
fn errors_display_as_file_line_column_message() {
    let text = generator_with("parallelism = 0");
    let err = parse(&text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "test.toml:5:15: `parallelism` of source \"in\": expected at least 1, found 0"
    );
    assert_eq!(
        err.location(),
        Some(&Location {
            file: "test.toml".into(),
            line: 5,
            column: 15
        })
    );
}

#[test]
fn unreadable_file_names_the_path() {
    let err = Job::from_file("/nonexistent/weir/job.toml").unwrap_err();
    assert!(matches!(err, JobError::Read { .. }));
    assert_eq!(err.line(), None);
    assert!(
        err.to_string()
            .starts_with("/nonexistent/weir/job.toml: cannot read the job file"),
        "{err}"
    );
}

// ---- errors: values --------------------------------------------------------

#[test]
fn bad_duration_lists_the_allowed_forms() {
    let text = with_table("checkpoint", "timeout = \"5 sec\"");
    let (line, problem) = invalid(&text);
    assert_eq!(line, 3);
    let Problem::BadValue {
        key,
        found,
        expected,
    } = problem
    else {
        panic!("{problem:?}")
    };
    assert_eq!(
        (key.as_str(), found.as_str()),
        ("`checkpoint.timeout`", "\"5 sec\"")
    );
    assert_eq!(expected, DURATION_FORMS);
}

#[test]
fn bad_size_lists_the_allowed_forms() {
    let text = with_table("limits", "max_state = \"1TB\"");
    let (line, problem) = invalid(&text);
    assert_eq!(line, 3);
    assert!(
        matches!(problem, Problem::BadValue { ref expected, .. } if expected == SIZE_FORMS),
        "{problem:?}"
    );
}

#[test]
fn memory_limit_below_one_wasm_page_is_refused() {
    let text = with_table("limits", "max_memory = \"1KiB\"");
    assert_bad_value(&text, 3, "`limits.max_memory`", "\"1KiB\"");
}

#[test]
fn operator_limit_error_names_the_operator() {
    let text = r#"name = "t"
[[source]]
name = "in"
type = "generator"
[[operator]]
name = "op"
module = "op.wasm"
inputs = ["in"]
limits = { call_timeout = "0s" }
[[sink]]
name = "out"
type = "stdout"
inputs = ["op"]
"#;
    assert_bad_value(
        text,
        9,
        "`limits.call_timeout` of operator \"op\"",
        "\"0s\"",
    );
}

#[test]
fn zero_interval_is_refused() {
    let text = MINIMAL.replace(
        "[[source]]",
        "\n[checkpoint]\ninterval = \"0ms\"\n[[source]]",
    );
    assert_bad_value(&text, 4, "`checkpoint.interval`", "\"0ms\"");
}

#[test]
fn zero_timeout_is_refused() {
    let text = with_table("checkpoint", "interval = \"1s\"\ntimeout = \"0s\"");
    assert_bad_value(&text, 4, "`checkpoint.timeout`", "\"0s\"");
}

#[test]
fn zero_max_concurrent_is_refused() {
    let text = with_table("checkpoint", "max_concurrent = 0");
    assert_bad_value(&text, 3, "`checkpoint.max_concurrent`", "0");
}

#[test]
fn zero_retained_is_refused() {
    let text = with_table("checkpoint", "\nretained = 0");
    assert_bad_value(&text, 4, "`checkpoint.retained`", "0");
}

#[test]
fn unknown_mode_and_retention_words_are_refused() {
    let mode = with_table("checkpoint", "mode = \"exactly_once\"");
    assert_bad_value(&mode, 3, "`checkpoint.mode`", "\"exactly_once\"");
    let retention = with_table("checkpoint", "on_cancel = \"keep\"");
    assert_bad_value(&retention, 3, "`checkpoint.on_cancel`", "\"keep\"");
}

#[test]
fn zero_parallelism_is_refused() {
    let text = MINIMAL.replace(
        "type = \"blackhole\"",
        "type = \"blackhole\"\nparallelism = 0",
    );
    assert_bad_value(&text, 8, "`parallelism` of sink \"out\"", "0");
}

#[test]
fn file_source_with_parallelism_above_one_is_refused() {
    let text = MINIMAL.replace(
        "type = \"generator\"",
        "type = \"file\"\npath = \"in.txt\"\nparallelism = 2",
    );
    assert_eq!(
        invalid(&text),
        (
            6,
            Problem::FileSourceParallelism {
                source_name: "in".into(),
                parallelism: 2
            }
        )
    );
}

#[test]
fn bad_vertex_and_job_names_are_refused() {
    let text = MINIMAL.replace("name = \"out\"", "name = \"out put\"");
    assert_bad_value(&text, 6, "`name` of a sink", "\"out put\"");
    let text = MINIMAL.replace("name = \"t\"", "name = \"../t\"");
    assert_bad_value(&text, 1, "`name`", "\"../t\"");
}

#[test]
fn unknown_source_and_sink_types_are_refused() {
    let text = MINIMAL.replace("\"generator\"", "\"pulsar\"");
    assert_bad_value(&text, 4, "`type` of source \"in\"", "\"pulsar\"");
    let text = MINIMAL.replace("\"blackhole\"", "\"s3\"");
    assert_bad_value(&text, 7, "`type` of sink \"out\"", "\"s3\"");
}

#[test]
fn unknown_partitioner_is_refused() {
    let text = MINIMAL.replace(
        "inputs = [\"in\"]",
        "\ninputs = [{ from = \"in\", partition = \"hash\" }]",
    );
    let (line, key, found) = bad_value(&text);
    assert_eq!((line, found.as_str()), (9, "\"hash\""));
    assert_eq!(key, "`partition` of input \"in\" of sink \"out\"");
}

#[test]
fn generator_rate_must_be_positive() {
    let text = generator_with("rate = 0");
    assert_bad_value(&text, 5, "`rate` of source \"in\"", "0");
}

#[test]
fn missing_required_keys_are_named_with_their_meaning() {
    let no_type = MINIMAL.replace("type = \"generator\"\n", "");
    let (line, problem) = invalid(&no_type);
    assert_eq!(line, 3);
    assert!(
        matches!(problem, Problem::MissingKey { key: "type", ref owner, .. } if owner == "source \"in\"")
    );

    let no_path = MINIMAL.replace("\"blackhole\"", "\"file\"");
    let (line, problem) = invalid(&no_path);
    assert_eq!(line, 6);
    assert!(
        matches!(problem, Problem::MissingKey { key: "path", ref owner, .. } if owner == "file sink \"out\"")
    );

    let no_module = r#"name = "t"
[[source]]
name = "in"
type = "generator"
[[operator]]
name = "op"
inputs = ["in"]
[[sink]]
name = "out"
type = "stdout"
inputs = ["op"]
"#;
    let (line, problem) = invalid(no_module);
    assert_eq!(line, 6);
    assert!(matches!(problem, Problem::MissingKey { key: "module", .. }));
}

#[test]
fn keys_of_another_type_are_refused() {
    let text = generator_with("follow = true");
    let (line, problem) = invalid(&text);
    assert_eq!(line, 5);
    assert_eq!(
        problem,
        Problem::KeyNotAllowed {
            key: "follow",
            owner: "generator source \"in\"".into(),
            allowed: validate::GENERATOR_KEYS.to_vec(),
        }
    );
    let text = MINIMAL.replace(
        "type = \"blackhole\"",
        "type = \"blackhole\"\npath = \"out\"",
    );
    let (line, problem) = invalid(&text);
    assert_eq!(line, 8);
    assert!(matches!(
        problem,
        Problem::KeyNotAllowed { key: "path", .. }
    ));
}

// ---- errors: the restart strategy -----------------------------------------

/// [`MINIMAL`] with the `[restart]` table `keys` (TOML lines).
fn with_restart(keys: &str) -> String {
    with_table("restart", keys)
}

#[test]
fn delay_on_exponential_delay_is_refused() {
    let (line, problem) = invalid(&with_restart(
        "strategy = \"exponential-delay\"\ninitial = \"1s\"\ndelay = \"1s\"",
    ));
    assert_eq!(line, 5);
    assert_eq!(
        problem,
        Problem::KeyNotAllowed {
            key: "delay",
            owner: "restart strategy \"exponential-delay\"".into(),
            allowed: vec!["strategy", "initial", "max", "multiplier", "attempts"],
        }
    );
}

#[test]
fn exponential_keys_on_fixed_delay_and_any_key_on_none_are_refused() {
    let (line, problem) = invalid(&with_restart(
        "strategy = \"fixed-delay\"\nmultiplier = 2.0",
    ));
    assert_eq!(line, 4);
    assert!(matches!(
        problem,
        Problem::KeyNotAllowed {
            key: "multiplier",
            ..
        }
    ));
    let (line, problem) = invalid(&with_restart("strategy = \"none\"\nattempts = 3"));
    assert_eq!(line, 4);
    assert!(matches!(
        problem,
        Problem::KeyNotAllowed {
            key: "attempts",
            ..
        }
    ));
}

#[test]
fn multiplier_below_one_is_refused() {
    let text = with_restart("strategy = \"exponential-delay\"\nmultiplier = 0.5");
    assert_bad_value(&text, 4, "`restart.multiplier`", "0.5");
}

#[test]
fn max_below_initial_is_refused() {
    let text = with_restart("strategy = \"exponential-delay\"\ninitial = \"2s\"\nmax = \"1s\"");
    assert_bad_value(&text, 5, "`restart.max`", "\"1s\"");
}

#[test]
fn unknown_or_missing_strategy_is_refused() {
    let text = with_restart("strategy = \"always\"");
    assert_bad_value(&text, 3, "`restart.strategy`", "\"always\"");
    let (line, problem) = invalid(&with_restart("attempts = 3"));
    assert_eq!(line, 3);
    assert!(matches!(
        problem,
        Problem::MissingKey {
            key: "strategy",
            ..
        }
    ));
}

// ---- errors: the graph ------------------------------------------------------

#[test]
fn duplicate_vertex_names_are_refused_across_kinds() {
    let text = MINIMAL.replace("name = \"out\"", "name = \"in\"");
    assert_eq!(
        invalid(&text),
        (
            6,
            Problem::DuplicateVertex {
                name: "in".into(),
                first_line: 3
            }
        )
    );
}

#[test]
fn unknown_input_lists_the_known_vertices() {
    let text = MINIMAL.replace("inputs = [\"in\"]", "inputs = [\"input\"]");
    let (line, problem) = invalid(&text);
    assert_eq!(line, 8);
    assert_eq!(
        problem,
        Problem::UnknownInput {
            kind: "sink",
            vertex: "out".into(),
            input: "input".into(),
            known: vec!["in".into()]
        }
    );
    assert!(
        problem.to_string().contains("known vertices are \"in\""),
        "{problem}"
    );
}

#[test]
fn input_from_a_sink_is_refused() {
    let text = format!(
        "{MINIMAL}[[sink]]\nname = \"more\"\ntype = \"stdout\"\ninputs = [\"in\", \"out\"]\n"
    );
    assert_eq!(
        invalid(&text),
        (
            12,
            Problem::InputFromSink {
                kind: "sink",
                vertex: "more".into(),
                sink: "out".into()
            }
        )
    );
}

#[test]
fn source_with_inputs_is_refused() {
    let text = generator_with("inputs = []");
    assert_eq!(
        invalid(&text),
        (
            5,
            Problem::SourceWithInputs {
                source_name: "in".into()
            }
        )
    );
}

#[test]
fn operator_without_inputs_is_refused() {
    let text = r#"name = "t"
[[source]]
name = "in"
type = "generator"
[[operator]]
name = "op"
module = "op.wasm"
[[sink]]
name = "out"
type = "stdout"
inputs = ["in"]
"#;
    assert_eq!(
        invalid(text),
        (
            6,
            Problem::NoInputs {
                kind: "operator",
                vertex: "op".into()
            }
        )
    );
}

#[test]
fn sink_with_empty_inputs_is_refused() {
    let text = MINIMAL.replace("inputs = [\"in\"]", "inputs = []");
    assert_eq!(
        invalid(&text),
        (
            8,
            Problem::NoInputs {
                kind: "sink",
                vertex: "out".into()
            }
        )
    );
}

#[test]
fn same_input_twice_is_refused() {
    let text = MINIMAL.replace(
        "inputs = [\"in\"]",
        "inputs = [\"in\",\n  { from = \"in\", partition = \"broadcast\" }]",
    );
    assert_eq!(
        invalid(&text),
        (
            9,
            Problem::DuplicateInput {
                kind: "sink",
                vertex: "out".into(),
                input: "in".into(),
                output: None,
            }
        )
    );
}

#[test]
fn cycles_are_refused_naming_every_vertex_on_them() {
    let text = r#"name = "t"
[[source]]
name = "in"
type = "generator"
[[operator]]
name = "a"
module = "a.wasm"
inputs = ["in", "c"]
[[operator]]
name = "b"
module = "b.wasm"
inputs = ["a"]
[[operator]]
name = "c"
module = "c.wasm"
inputs = ["b"]
[[sink]]
name = "out"
type = "stdout"
inputs = ["c"]
"#;
    let (line, problem) = invalid(text);
    assert_eq!(line, 8, "the input closing the cycle into its first vertex");
    assert_eq!(
        problem,
        Problem::Cycle {
            cycle: vec!["a".into(), "b".into(), "c".into(), "a".into()]
        }
    );
    assert!(
        problem.to_string().contains("a -> b -> c -> a"),
        "{problem}"
    );
}

#[test]
fn an_operator_reading_itself_is_a_cycle() {
    let text = r#"name = "t"
[[source]]
name = "in"
type = "generator"
[[operator]]
name = "loop"
module = "loop.wasm"
inputs = [
  "in",
  "loop",
]
[[sink]]
name = "out"
type = "stdout"
inputs = ["loop"]
"#;
    assert_eq!(
        invalid(text),
        (
            10,
            Problem::Cycle {
                cycle: vec!["loop".into(), "loop".into()]
            }
        )
    );
}

#[test]
fn forward_between_different_parallelisms_is_refused() {
    let text = MINIMAL
        .replace(
            "type = \"blackhole\"",
            "type = \"blackhole\"\nparallelism = 2",
        )
        .replace(
            "inputs = [\"in\"]",
            "inputs = [{ from = \"in\", partition = \"forward\" }]",
        );
    let (line, problem) = invalid(&text);
    assert_eq!(line, 9);
    assert_eq!(
        problem,
        Problem::ForwardParallelism {
            from: "in".into(),
            from_parallelism: 1,
            to: "out".into(),
            to_parallelism: 2
        }
    );
    assert!(
        problem
            .to_string()
            .contains("use rebalance or key-hash, or match parallelism"),
        "{problem}"
    );
}

#[test]
fn job_without_source_or_sink_is_refused() {
    let no_source = "name = \"t\"\n[[sink]]\nname = \"out\"\ntype = \"stdout\"\ninputs = [\"x\"]\n";
    assert_eq!(invalid(no_source), (1, Problem::NoSource));
    let no_sink = "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n";
    assert_eq!(invalid(no_sink), (1, Problem::NoSink));
}

#[test]
fn output_nothing_reads_is_refused() {
    let text = MINIMAL.replace(
        "[[sink]]",
        "[[source]]\nname = \"unused\"\ntype = \"generator\"\n[[sink]]",
    );
    assert_eq!(
        invalid(&text),
        (
            6,
            Problem::UnusedOutput {
                kind: "source",
                vertex: "unused".into()
            }
        )
    );
}

// ---- module files ------------------------------------------------------------

#[test]
fn missing_module_is_named_with_its_resolved_path_and_the_build_command() {
    let dir = tempfile::tempdir().unwrap();
    let job_file = dir.path().join("job.toml");
    std::fs::write(
        &job_file,
        "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
         [[operator]]\nname = \"op\"\nmodule = \"guests/op.wasm\"\ninputs = [\"in\"]\n\
         [[sink]]\nname = \"out\"\ntype = \"stdout\"\ninputs = [\"op\"]\n",
    )
    .unwrap();

    let job = Job::from_file(&job_file).expect("module files are not checked by from_file");
    let err = job.check_modules_exist().unwrap_err();
    assert_eq!(err.line(), Some(7));
    let expected = dir.path().join("guests/op.wasm");
    assert_eq!(
        err.problem(),
        Some(&Problem::ModuleMissing {
            operator: "op".into(),
            path: expected.clone()
        })
    );
    let message = err.to_string();
    assert!(
        message.contains(&expected.display().to_string()),
        "{message}"
    );
    assert!(
        message.contains("bash scripts/build-guests.sh"),
        "{message}"
    );
    assert_eq!(Job::load(&job_file).unwrap_err().line(), Some(7));

    std::fs::create_dir(dir.path().join("guests")).unwrap();
    std::fs::write(&expected, b"\0asm\x01\0\0\0").unwrap();
    job.check_modules_exist().unwrap();
    Job::load(&job_file).unwrap();
}

// ---- docs/JOB.md -----------------------------------------------------------

fn job_md() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/JOB.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_complete_job_in_job_md_is_valid() {
    let doc = job_md();
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .filter(|block| block.starts_with("name ="))
        .collect();
    assert!(blocks.len() >= 2, "the opening and the complete example");
    for block in blocks {
        let job =
            Job::from_str(block, "/jobs", "JOB.md").unwrap_or_else(|e| panic!("{e}\n{block}"));
        assert!(job.sinks().count() >= 1);
    }
}

#[test]
fn every_source_shown_in_job_md_is_valid() {
    let doc = job_md();
    let sources: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .filter(|block| block.starts_with("[[source]]"))
        .collect();
    assert!(
        sources.len() >= 2,
        "the jsonl and the integer generator examples"
    );
    for block in sources {
        let name = block
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .unwrap();
        let text = format!(
            "name = \"t\"\n{block}\n[[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [{name}]\n"
        );
        parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    }
}

#[test]
fn every_sink_shown_in_job_md_is_valid() {
    let doc = job_md();
    let sinks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .filter(|block| block.starts_with("[[sink]]"))
        .collect();
    assert!(!sinks.is_empty(), "the Kafka sink example");
    for block in sinks {
        // A generator for every input the block names.
        let mut text = String::from("name = \"t\"\n[checkpoint]\ninterval = \"1s\"\n");
        for inputs in block.lines().filter_map(|l| l.strip_prefix("inputs = [")) {
            let name = inputs.split(']').next().unwrap();
            text.push_str(&format!(
                "[[source]]\nname = {name}\ntype = \"generator\"\n"
            ));
        }
        text.push_str(block);
        parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    }
}

#[test]
fn error_messages_shown_in_job_md_are_the_ones_weir_prints() {
    let doc = job_md();
    let text = std::fs::read_to_string(wordcount_path()).unwrap();
    let file = "examples/jobs/wordcount.toml";
    let messages = [
        Job::from_str(
            &text.replace("\"1s\"   ", "\"5 sec\""),
            "examples/jobs",
            file,
        )
        .unwrap_err(),
        Job::from_str(
            &text.replace("\"key-hash\"", "\"forward\""),
            "examples/jobs",
            file,
        )
        .unwrap_err(),
    ];
    for message in messages {
        let line = message.to_string();
        assert!(doc.contains(&line), "docs/JOB.md should show:\n{line}");
    }
    // Relative to the test's directory (host/), this module path cannot exist.
    let job = Job::from_str(&text, "examples/jobs", file).unwrap();
    if let Err(missing) = job.check_modules_exist() {
        assert!(
            doc.contains(&missing.to_string()),
            "docs/JOB.md should show:\n{missing}"
        );
    }
}

// ---- overlapping paths, bounds on every number, files checked at load ----

/// A generator → `sinks` job; each sink is `(name, path)` of a file sink.
fn with_file_sinks(checkpoint_dir: Option<&str>, sinks: &[(&str, &str)]) -> String {
    let mut text = String::from("name = \"t\"\n");
    if let Some(dir) = checkpoint_dir {
        text.push_str(&format!("[checkpoint]\ndirectory = {dir:?}\n"));
    }
    text.push_str("[[source]]\nname = \"in\"\ntype = \"generator\"\n");
    for (name, path) in sinks {
        text.push_str(&format!(
            "[[sink]]\nname = {name:?}\ntype = \"file\"\npath = {path:?}\ninputs = [\"in\"]\n"
        ));
    }
    text
}

/// The message of the error `text` gives; fails if it is valid.
#[track_caller]
fn refused(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("expected an error, the job is valid:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn two_file_sinks_with_the_same_path_are_refused_naming_both() {
    // Sink "a" is named on line 6; sink "b" on line 11, its path on line 13.
    let text = with_file_sinks(None, &[("a", "out"), ("b", "./out")]);
    let message = refused(&text);
    assert!(message.starts_with("test.toml:13:"), "{message}");
    assert!(
        message.contains("file sink \"a\" (line 6)")
            && message.contains("file sink \"b\" (line 11)")
            && message.contains("the same path"),
        "{message}"
    );
}

#[test]
fn file_sinks_with_nested_paths_are_refused_either_way_round() {
    for sinks in [
        [("a", "out"), ("b", "out/b")],
        [("a", "out/x/../b/c"), ("b", "out/b")],
        [("a", "/jobs/out/b"), ("b", "out")],
    ] {
        let message = refused(&with_file_sinks(None, &sinks));
        assert!(
            message.contains("\"a\"") && message.contains("\"b\"") && message.contains("inside"),
            "{sinks:?}: {message}"
        );
    }
    // Siblings, and names that only share a prefix, are fine.
    job(&with_file_sinks(None, &[("a", "out/a"), ("b", "out/b")]));
    job(&with_file_sinks(None, &[("a", "out"), ("b", "output")]));
}

#[test]
fn a_file_sink_in_or_around_the_checkpoint_directory_is_refused() {
    for (checkpoint, sink) in [
        (Some("state"), "state"),
        (Some("state"), "state/out"),
        (Some("state/t"), "state"),
        // The default checkpoint directory is checkpoints/<job name>.
        (None, "checkpoints"),
    ] {
        let message = refused(&with_file_sinks(checkpoint, &[("a", sink)]));
        assert!(
            message.contains("checkpoint") && message.contains("\"a\""),
            "{checkpoint:?} {sink}: {message}"
        );
    }
    job(&with_file_sinks(Some("state"), &[("a", "out")]));
}

#[test]
fn a_file_source_reading_a_file_sinks_directory_is_refused() {
    let text = "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"file\"\npath = \"out/part-0000-0000000000\"\n\
                [[sink]]\nname = \"out\"\ntype = \"file\"\npath = \"out\"\ninputs = [\"in\"]\n";
    let message = refused(text);
    assert!(
        message.contains("\"in\"") && message.contains("\"out\""),
        "{message}"
    );
}

#[test]
fn parallelism_is_bounded_per_vertex_and_in_total() {
    let text = generator_with("parallelism = 1000000000");
    let message = refused(&text);
    assert!(message.contains("at most 256"), "{message}");
    // 5 vertices of 256 each: 1280 subtasks.
    let mut text = String::from(
        "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\nparallelism = 256\n",
    );
    for i in 0..4 {
        text.push_str(&format!(
            "[[sink]]\nname = \"out{i}\"\ntype = \"blackhole\"\nparallelism = 256\ninputs = [\"in\"]\n"
        ));
    }
    let message = refused(&text);
    assert!(
        message.contains("1280") && message.contains("1024"),
        "{message}"
    );
}

#[test]
fn generator_sizes_and_counts_are_bounded() {
    for (key, value, expected) in [
        ("value_size", "100000000000", "at most"),
        ("value_size", "18446744073709551615", "at most"),
        ("count", "18446744073709551615", "at most"),
        ("rate", "1e300", "at most"),
    ] {
        let text = MINIMAL.replace(
            "type = \"generator\"",
            &format!("type = \"generator\"\n{key} = {value}"),
        );
        let message = refused(&text);
        assert!(
            message.contains(expected) && message.contains(key),
            "{key} = {value}: {message}"
        );
    }
}

#[test]
fn a_duration_too_large_for_its_knob_says_it_overflows_or_is_too_long() {
    let with = |table: &str, key: &str, value: &str| {
        MINIMAL.replace(
            "[[source]]",
            &format!("[{table}]\n{key} = {value:?}\n[[source]]"),
        )
    };
    let message_of = |table: &str, key: &str, value: &str| refused(&with(table, key, value));
    let overflow = message_of("checkpoint", "interval", "9999999999999h");
    assert!(
        overflow.contains("overflows") && overflow.contains("at most"),
        "{overflow}"
    );
    let too_long = message_of("checkpoint", "interval", "18446744073709551615ms");
    assert!(too_long.contains("at most"), "{too_long}");
    for (table, key) in [
        ("checkpoint", "min_pause"),
        ("checkpoint", "timeout"),
        ("limits", "call_timeout"),
    ] {
        let m = message_of(table, key, "99999999999999999999h");
        assert!(m.contains("overflows"), "{key}: {m}");
        let m = message_of(table, key, "9999999h");
        assert!(m.contains("at most"), "{key}: {m}");
    }
    let restart = with_restart("strategy = \"fixed-delay\"\ndelay = \"9999999h\"");
    assert!(refused(&restart).contains("at most"));
    // A long but sane interval stays valid.
    job(&with("checkpoint", "interval", "24h"));
}

#[test]
fn the_timer_limit_is_a_size_the_guests_get() {
    let text = with_table("limits", "max_timer_state = \"1MiB\"");
    let job = job(&text);
    assert_eq!(job.limits.max_timer_bytes, 1 << 20);
    assert!(
        job.to_toml().contains("max_timer_state = \"1MiB\""),
        "{}",
        job.to_toml()
    );
}

#[test]
fn memory_and_output_limits_are_bounded_by_what_a_guest_can_address() {
    for key in ["max_memory", "max_output", "max_state", "max_timer_state"] {
        let text = MINIMAL.replace(
            "[[source]]",
            &format!("[limits]\n{key} = \"5GiB\"\n[[source]]"),
        );
        let m = refused(&text);
        assert!(m.contains("at most 4GiB"), "{key}: {m}");
        let text = MINIMAL.replace(
            "[[source]]",
            &format!("[limits]\n{key} = \"99999999999999999999GiB\"\n[[source]]"),
        );
        let m = refused(&text);
        assert!(m.contains("overflows"), "{key}: {m}");
    }
}

#[test]
fn a_missing_file_source_is_found_at_load_unless_followed() {
    let dir = tempfile::tempdir().unwrap();
    let job_file = dir.path().join("job.toml");
    let text = |follow: bool| {
        format!(
            "name = \"t\"\n[[source]]\nname = \"lines\"\ntype = \"file\"\npath = \"in.txt\"\nfollow = {follow}\n\
             [[sink]]\nname = \"out\"\ntype = \"stdout\"\ninputs = [\"lines\"]\n"
        )
    };
    std::fs::write(&job_file, text(false)).unwrap();
    let err = Job::load(&job_file).unwrap_err();
    let message = err.to_string();
    assert_eq!(
        err.line(),
        Some(3),
        "the line of the source's name: {message}"
    );
    assert!(
        message.contains("\"lines\"")
            && message.contains(&dir.path().join("in.txt").display().to_string())
            && message.contains("follow"),
        "{message}"
    );
    // Waiting for it is what `follow` does.
    std::fs::write(&job_file, text(true)).unwrap();
    Job::load(&job_file).unwrap();
    // A directory is not a file to read.
    std::fs::write(&job_file, text(false)).unwrap();
    std::fs::create_dir(dir.path().join("in.txt")).unwrap();
    let message = Job::load(&job_file).unwrap_err().to_string();
    assert!(message.contains("not a regular file"), "{message}");
    std::fs::remove_dir(dir.path().join("in.txt")).unwrap();
    std::fs::write(dir.path().join("in.txt"), "a\n").unwrap();
    Job::load(&job_file).unwrap();
}

#[test]
fn a_module_that_is_a_directory_or_a_device_is_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("op.wasm")).unwrap();
    for module in [dir.path().join("op.wasm"), PathBuf::from("/dev/zero")] {
        let text = format!(
            "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
             [[operator]]\nname = \"op\"\nmodule = {:?}\ninputs = [\"in\"]\n\
             [[sink]]\nname = \"out\"\ntype = \"stdout\"\ninputs = [\"op\"]\n",
            module.display().to_string()
        );
        let job = Job::from_str(&text, dir.path(), "test.toml").unwrap();
        let message = job.check_modules_exist().unwrap_err().to_string();
        assert!(
            message.contains("not a regular file") && !message.contains("not found"),
            "{}: {message}",
            module.display()
        );
    }
}

#[cfg(unix)]
#[test]
fn file_sinks_that_meet_through_a_symlink_are_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
    let job_file = dir.path().join("job.toml");
    std::fs::write(
        &job_file,
        with_file_sinks(None, &[("a", "real/out"), ("b", "link/out")]),
    )
    .unwrap();
    Job::from_file(&job_file).expect("the paths differ as written");
    let message = Job::load(&job_file).unwrap_err().to_string();
    assert!(
        message.contains("\"a\" (line 6)") && message.contains("\"b\" (line 11)"),
        "{message}"
    );
}

// ---- keyed file sources and integer generators -------------------------------------------

/// A jsonl source, a csv source and an integer generator, every new key set.
const FORMATS: &str = r#"name = "formats"
[[source]]
name = "events"
type = "file"
path = "events.jsonl"
format = "jsonl"
key = "/user/id"
value = "/amount"
timestamp = "/at"
on_error = "skip"
[[source]]
name = "table"
type = "file"
path = "table.csv"
format = "csv"
header = true
key = 2
value = 0
[[source]]
name = "dice"
type = "generator"
values = "integers"
min = -6
max = 6
[[sink]]
name = "out"
type = "blackhole"
inputs = ["events", "table", "dice"]
"#;

/// A job whose only source is the file source `in` with `keys` (TOML lines) added.
fn file_source_with(keys: &str) -> String {
    format!(
        "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"file\"\npath = \"in.txt\"\n{keys}\n\
         [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"in\"]\n"
    )
}

/// A job whose only source is the generator `in` with `keys` (TOML lines) added.
fn generator_with(keys: &str) -> String {
    MINIMAL.replace(
        "type = \"generator\"",
        &format!("type = \"generator\"\n{keys}"),
    )
}

/// The whole message of a refused job file, `file:line:column: problem`.
#[track_caller]
fn message(text: &str) -> String {
    parse(text)
        .expect_err("the job should be refused")
        .to_string()
}

#[test]
fn file_sources_read_their_format_fields_and_error_policy() {
    let job = job(FORMATS);
    assert_eq!(
        job.vertex("events").unwrap().kind,
        VertexKind::Source(SourceKind::File {
            path: "/jobs/events.jsonl".into(),
            follow: false,
            format: FileFormat::Jsonl(RecordFields {
                key: Some("/user/id".into()),
                value: Some("/amount".into()),
                timestamp: Some("/at".into()),
            }),
            on_error: OnError::Skip,
        })
    );
    assert_eq!(
        job.vertex("table").unwrap().kind,
        VertexKind::Source(SourceKind::File {
            path: "/jobs/table.csv".into(),
            follow: false,
            format: FileFormat::Csv {
                fields: RecordFields {
                    key: Some(2),
                    value: Some(0),
                    timestamp: None,
                },
                header: true,
            },
            on_error: OnError::Fail,
        })
    );
    let VertexKind::Source(SourceKind::Generator(dice)) = &job.vertex("dice").unwrap().kind else {
        panic!("dice is a generator");
    };
    assert_eq!(dice.values, GeneratorValues::Integers { min: -6, max: 6 });
    // The defaults: lines, fail; letters; integers from 0 to 99.
    let plain = self::job(&file_source_with(""));
    let VertexKind::Source(SourceKind::File {
        format, on_error, ..
    }) = &plain.vertices[0].kind
    else {
        panic!("in is a file source");
    };
    assert_eq!((format, *on_error), (&FileFormat::Lines, OnError::Fail));
    let integers = self::job(&generator_with("values = \"integers\""));
    let VertexKind::Source(SourceKind::Generator(settings)) = &integers.vertices[0].kind else {
        panic!("in is a generator");
    };
    assert_eq!(
        settings.values,
        GeneratorValues::Integers { min: 0, max: 99 }
    );
}

#[test]
fn formats_and_integer_generators_round_trip_through_toml() {
    let original = job(FORMATS);
    let written = original.to_toml();
    let reread = parse(&written).unwrap_or_else(|e| panic!("{e}\n{written}"));
    assert_eq!(without_lines(reread), without_lines(original), "{written}");
    // A lines source is written back without the new keys, as before they existed.
    let plain = job(&file_source_with("")).to_toml();
    for key in ["format", "on_error", "values"] {
        assert!(!plain.contains(key), "{key} in:\n{plain}");
    }
}

#[test]
fn the_format_and_its_fields_are_settings_not_shape() {
    let lines = job(&file_source_with("")).fingerprint();
    for keys in [
        "format = \"jsonl\"\nkey = \"/k\"\non_error = \"skip\"",
        "format = \"csv\"\nkey = 1\nvalue = 0\nheader = true",
    ] {
        assert_eq!(job(&file_source_with(keys)).fingerprint(), lines, "{keys}");
    }
    assert_eq!(
        job(&generator_with("values = \"integers\"\nmax = 5")).fingerprint(),
        job(MINIMAL).fingerprint()
    );
}

#[test]
fn an_unknown_format_or_error_policy_is_refused_with_the_choices() {
    assert_eq!(
        message(&file_source_with("format = \"json\"")),
        "test.toml:6:10: `format` of source \"in\": expected \"lines\" (a record per line, as it \
         is), \"jsonl\" (a JSON document per line) or \"csv\" (comma-separated values), found \
         \"json\""
    );
    assert_eq!(
        message(&file_source_with("format = \"csv\"\non_error = \"ignore\"")),
        "test.toml:7:12: `on_error` of source \"in\": expected \"fail\" (a malformed line fails \
         the task) or \"skip\" (it is dropped, counted and logged), found \"ignore\""
    );
}

#[test]
fn fields_on_a_lines_source_are_refused_with_the_fix() {
    assert_eq!(
        message(&file_source_with("key = \"/user\"")),
        "test.toml:6:7: `key` of source \"in\" does not apply with `format = \"lines\"`: a \
         line is read whole, as the value, with an empty key; set `format = \"jsonl\"` or \
         `format = \"csv\"` to read fields, or remove `key`"
    );
    for (keys, key, line) in [
        ("format = \"lines\"\ntimestamp = 0", "timestamp", 7),
        ("on_error = \"skip\"", "on_error", 6),
        ("header = true", "header", 6),
        ("format = \"jsonl\"\nheader = true", "header", 7),
    ] {
        let (at, problem) = invalid(&file_source_with(keys));
        assert_eq!(at, line, "{keys}");
        let Problem::NeedsSetting { key: named, .. } = &problem else {
            panic!("{keys}: {problem:?}");
        };
        assert!(named.starts_with(&format!("`{key}`")), "{keys}: {problem}");
        assert!(
            problem.to_string().contains("remove `"),
            "{keys}: {problem}"
        );
    }
}

#[test]
fn json_pointers_must_start_with_a_slash_and_escape_tildes() {
    assert_eq!(
        message(&file_source_with("format = \"jsonl\"\nvalue = \"user.id\"")),
        "test.toml:7:9: `value` of source \"in\": expected a JSON pointer starting with \"/\", \
         such as \"/user/id\" (RFC 6901: `~` is written `~0`, a `/` inside a member's name \
         `~1`); leave `value` out for the whole line, found \"user.id\""
    );
    for pointer in ["\"\"", "\"/a~2\"", "\"/a~\"", "3", "[\"/a\"]"] {
        let text = file_source_with(&format!("format = \"jsonl\"\nkey = {pointer}"));
        let (line, key, _) = bad_value(&text);
        assert_eq!(
            (line, key.as_str()),
            (7, "`key` of source \"in\""),
            "{pointer}"
        );
    }
    job(&file_source_with(
        "format = \"jsonl\"\nkey = \"/a~0b/c~1d/0\"\ntimestamp = \"/\"",
    ));
}

#[test]
fn csv_columns_are_indices_from_zero() {
    assert_eq!(
        message(&file_source_with("format = \"csv\"\nkey = \"user\"")),
        "test.toml:7:7: `key` of source \"in\": expected a column index from 0 to 65535, \
         counted from 0, such as `key = 0`: columns are numbered, not named (`header = true` \
         skips a header row), found \"user\""
    );
    for column in ["-1", "65536", "1.5"] {
        let text = file_source_with(&format!("format = \"csv\"\ntimestamp = {column}"));
        let (line, key, found) = bad_value(&text);
        assert_eq!(line, 7);
        assert_eq!(key, "`timestamp` of source \"in\"");
        assert_eq!(found, column);
    }
    job(&file_source_with("format = \"csv\"\ntimestamp = 65535"));
}

#[test]
fn integer_generators_need_an_ordered_range_and_no_value_size() {
    assert_eq!(
        message(&generator_with("values = \"integers\"\nmin = 10\nmax = 5")),
        "test.toml:7:7: `max` of source \"in\": expected an integer at least `min` (10): the \
         range is `min` to `max`, both included, found 5"
    );
    assert_eq!(
        message(&generator_with("values = \"integers\"\nmin = 100")),
        "test.toml:6:7: `min` of source \"in\": expected an integer at most `max` (99, its \
         default): set `max` too, or lower `min`, found 100"
    );
    assert_eq!(
        message(&generator_with("values = \"integers\"\nvalue_size = 8")),
        "test.toml:6:14: `value_size` of source \"in\" does not apply with `values = \
         \"integers\"`: an integer takes as many bytes as its decimal digits; remove \
         `value_size`, or set `values = \"letters\"`"
    );
    assert_eq!(
        message(&generator_with("max = 5")),
        "test.toml:5:7: `max` of source \"in\" does not apply with `values = \"letters\"`: \
         letters have no range; set `values = \"integers\"` for integers from `min` to `max`, \
         or remove `max`"
    );
    let (line, key, found) = bad_value(&generator_with("values = \"digits\""));
    assert_eq!(
        (line, key.as_str(), found.as_str()),
        (5, "`values` of source \"in\"", "\"digits\"")
    );
    job(&generator_with(&format!(
        "values = \"integers\"\nmin = {}\nmax = {}",
        i64::MIN,
        i64::MAX
    )));
    job(&generator_with("values = \"integers\"\nmin = 7\nmax = 7"));
}

#[test]
fn file_source_keys_of_a_generator_are_refused() {
    let (line, problem) = invalid(&generator_with("format = \"jsonl\""));
    assert_eq!(line, 5);
    assert!(
        matches!(problem, Problem::KeyNotAllowed { key: "format", .. }),
        "{problem:?}"
    );
    let (line, problem) = invalid(&file_source_with("values = \"integers\""));
    assert_eq!(line, 6);
    assert!(
        matches!(problem, Problem::KeyNotAllowed { key: "values", .. }),
        "{problem:?}"
    );
}

// ---- event time: watermarks, side outputs, generator disorder -------------

/// Generator `in` → operator `windows` → sink `out`, whose `inputs` is `inputs` (TOML) on
/// line 12.
fn reading_windows(inputs: &str) -> String {
    format!(
        "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
         [[operator]]\nname = \"windows\"\nmodule = \"windows.wasm\"\ninputs = [\"in\"]\n\
         [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = {inputs}\n"
    )
}

/// [`reading_windows`] with `keys` (TOML lines) added to the operator, from line 9.
fn windows_with(keys: &str) -> String {
    reading_windows("[\"windows\"]").replace(
        "inputs = [\"in\"]\n",
        &format!("inputs = [\"in\"]\n{keys}\n"),
    )
}

/// A Kafka source `in` with `keys` (TOML lines) added, from line 7.
fn kafka_source_with(keys: &str) -> String {
    MINIMAL.replace(
        "type = \"generator\"",
        &format!("type = \"kafka\"\nbootstrap = \"kafka-1:9092\"\ntopics = [\"t\"]\n{keys}"),
    )
}

#[test]
fn every_kind_of_source_takes_a_watermark_table() {
    let full =
        "watermark = { out_of_orderness = \"2s\", idle_timeout = \"10s\", interval = \"200ms\" }";
    let watermark = |text: &str| job(text).vertex("in").unwrap().watermark;
    let written = Some(WatermarkStrategy {
        out_of_orderness: Duration::from_secs(2),
        idle_timeout: Some(Duration::from_secs(10)),
        interval: Duration::from_millis(200),
    });
    assert_eq!(watermark(&generator_with(full)), written);
    assert_eq!(watermark(&file_source_with(full)), written);
    assert_eq!(watermark(&kafka_source_with(full)), written);
    // Without the table: no watermarks (but the last); operators and sinks never have one.
    assert_eq!(watermark(MINIMAL), None);
    assert!(
        job(&reading_windows("[\"windows\"]"))
            .vertices
            .iter()
            .all(|v| v.watermark.is_none())
    );
    // The empty table: every key at its default.
    assert_eq!(
        WatermarkStrategy::default(),
        WatermarkStrategy {
            out_of_orderness: Duration::ZERO,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            interval: DEFAULT_WATERMARK_INTERVAL,
        }
    );
    assert_eq!(DEFAULT_IDLE_TIMEOUT, Duration::from_secs(10));
    assert_eq!(DEFAULT_WATERMARK_INTERVAL, Duration::from_millis(200));
    assert_eq!(
        watermark(&generator_with("watermark = {}")),
        Some(WatermarkStrategy::default())
    );
    assert_eq!(
        watermark(&generator_with("watermark = { idle_timeout = \"off\" }")),
        Some(WatermarkStrategy {
            idle_timeout: None,
            ..WatermarkStrategy::default()
        })
    );
    // The table may also be written as a table of its own.
    let own_table = "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
                     [source.watermark]\ninterval = \"1s\"\nout_of_orderness = \"1500ms\"\n\
                     [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"in\"]\n";
    assert_eq!(
        watermark(own_table),
        Some(WatermarkStrategy {
            out_of_orderness: Duration::from_millis(1500),
            interval: Duration::from_secs(1),
            ..WatermarkStrategy::default()
        })
    );
}

#[test]
fn a_watermark_duration_of_the_wrong_form_is_refused_with_the_forms() {
    assert_eq!(
        message(&generator_with("watermark = { out_of_orderness = 2 }")),
        "test.toml:5:34: `watermark.out_of_orderness` of source \"in\": expected an integer \
         and a unit: ms, s, m or h (e.g. \"500ms\", \"5s\", \"2m\", \"1h\"), found 2"
    );
    assert_eq!(
        message(&generator_with(
            "watermark = { out_of_orderness = \"2 s\" }"
        )),
        "test.toml:5:34: `watermark.out_of_orderness` of source \"in\": expected an integer \
         and a unit: ms, s, m or h (e.g. \"500ms\", \"5s\", \"2m\", \"1h\"), found \"2 s\""
    );
    assert_eq!(
        message(&generator_with("watermark = { idle_timeout = \"never\" }")),
        "test.toml:5:30: `watermark.idle_timeout` of source \"in\": expected \"off\" or an \
         integer and a unit: ms, s, m or h (e.g. \"500ms\", \"5s\", \"2m\", \"1h\"), found \
         \"never\""
    );
    let (line, key, found) = bad_value(&generator_with("watermark = { interval = true }"));
    assert_eq!(
        (line, key.as_str(), found.as_str()),
        (5, "`watermark.interval` of source \"in\"", "true")
    );
}

#[test]
fn a_zero_watermark_interval_or_idle_timeout_is_refused_with_the_fix() {
    assert_eq!(
        message(&generator_with("watermark = { interval = \"0s\" }")),
        "test.toml:5:26: `watermark.interval` of source \"in\": expected a duration above \
         zero, e.g. \"200ms\" (how often the source emits a watermark), found \"0s\""
    );
    assert_eq!(
        message(&generator_with("watermark = { idle_timeout = \"0ms\" }")),
        "test.toml:5:30: `watermark.idle_timeout` of source \"in\": expected a duration above \
         zero, e.g. \"10s\", or \"off\" (then an idle split holds the watermark back), found \
         \"0ms\""
    );
    // No out-of-orderness is the default, and may be written.
    job(&generator_with("watermark = { out_of_orderness = \"0s\" }"));
}

#[test]
fn watermark_durations_are_bounded_like_every_duration() {
    assert_eq!(
        message(&generator_with(
            "watermark = { out_of_orderness = \"8761h\" }"
        )),
        "test.toml:5:34: `watermark.out_of_orderness` of source \"in\" = \"8761h\" is too \
         large: at most 8760h (365 days: a running job never reaches a longer one)"
    );
    for key in ["idle_timeout", "interval"] {
        let m = message(&generator_with(&format!(
            "watermark = {{ {key} = \"9999999h\" }}"
        )));
        assert!(
            m.contains(&format!("`watermark.{key}`")) && m.contains("at most 8760h"),
            "{m}"
        );
        let m = message(&generator_with(&format!(
            "watermark = {{ {key} = \"99999999999999999999h\" }}"
        )));
        assert!(m.contains("overflows"), "{m}");
    }
    job(&generator_with(
        "watermark = { out_of_orderness = \"8760h\" }",
    ));
}

#[test]
fn an_unknown_key_in_the_watermark_table_lists_its_keys() {
    let (line, message) = syntax(&generator_with("watermark = { lateness = \"2s\" }"));
    assert_eq!(line, 5);
    assert!(
        message.contains("unknown field `lateness`")
            && message.contains("`out_of_orderness`, `idle_timeout`, `interval`"),
        "{message}"
    );
    let (line, message) = syntax(&generator_with("watermark = \"2s\""));
    assert_eq!(line, 5);
    assert!(
        message.starts_with("`watermark`: invalid type: string \"2s\", expected a table")
            && message.contains("out_of_orderness"),
        "{message}"
    );
}

#[test]
fn a_watermark_on_an_operator_or_a_sink_is_refused_with_the_fix() {
    assert_eq!(
        message(&windows_with("watermark = { out_of_orderness = \"2s\" }")),
        "test.toml:9:13: operator \"windows\" has `watermark`: only sources make watermarks, \
         and operators and sinks go by those of their inputs; set `watermark` on the source \
         the records come from, or remove it"
    );
    let sink = format!("{MINIMAL}watermark = {{}}\n");
    assert_eq!(
        message(&sink),
        "test.toml:9:13: sink \"out\" has `watermark`: only sources make watermarks, and \
         operators and sinks go by those of their inputs; set `watermark` on the source the \
         records come from, or remove it"
    );
}

#[test]
fn watermarks_are_written_back_and_are_settings_not_shape() {
    let text = generator_with("watermark = { out_of_orderness = \"2s\", idle_timeout = \"off\" }");
    let written = job(&text).to_toml();
    assert!(written.contains("out_of_orderness = \"2s\""), "{written}");
    assert!(written.contains("idle_timeout = \"off\""), "{written}");
    assert!(
        written.contains("interval = \"200ms\""),
        "every setting explicit: {written}"
    );
    assert_eq!(without_lines(job(&written)), without_lines(job(&text)));
    assert!(!job(MINIMAL).to_toml().contains("watermark"));
    assert_eq!(job(&text).fingerprint(), job(MINIMAL).fingerprint());
}

#[test]
fn an_input_may_read_a_side_output_of_an_operator() {
    let text = reading_windows(
        "[\"windows\", { from = \"windows\", output = \"late\" }, { from = \"windows\", output = \
         \"errors\", partition = \"broadcast\" }]",
    );
    let side = |from: &str, port: u32, partitioner: Partitioner, output: &str| Edge {
        output: Some(output.into()),
        ..edge(from, "out", port, partitioner)
    };
    assert_eq!(
        job(&text).edges,
        [
            edge("in", "windows", 0, Partitioner::Forward),
            edge("windows", "out", 0, Partitioner::Forward),
            side("windows", 1, Partitioner::Forward, "late"),
            side("windows", 2, Partitioner::Broadcast, "errors"),
        ]
    );
    // Only a side output read: the operator still feeds something.
    job(&reading_windows(
        "[{ from = \"windows\", output = \"late\" }]",
    ));
    // Names are bytes of UTF-8: 127 two-byte letters are 254 bytes.
    job(&reading_windows(&format!(
        "[{{ from = \"windows\", output = \"{}\" }}]",
        "é".repeat(127)
    )));
}

#[test]
fn a_side_output_of_a_source_is_refused() {
    assert_eq!(
        message(&reading_windows(
            "[\"windows\", { from = \"in\", output = \"late\" }]"
        )),
        "test.toml:12:46: sink \"out\" reads side output \"late\" of source \"in\": sources have \
         only their main output; remove `output`, or read the side output of an operator"
    );
}

#[test]
fn a_side_output_name_is_1_to_255_bytes() {
    assert_eq!(
        message(&reading_windows("[{ from = \"windows\", output = \"\" }]")),
        "test.toml:12:40: `output` of input \"windows\" of sink \"out\": expected the name of a \
         side output of \"windows\", 1 to 255 bytes of UTF-8, as its guest passes it to \
         `emit_to` (docs/ABI.md §15), found \"\""
    );
    let long = "é".repeat(128);
    let (line, key, found) = bad_value(&reading_windows(&format!(
        "[{{ from = \"windows\", output = \"{long}\" }}]"
    )));
    assert_eq!(
        (line, key.as_str(), found),
        (
            12,
            "`output` of input \"windows\" of sink \"out\"",
            format!("\"{long}\" (256 bytes)")
        )
    );
}

#[test]
fn the_same_output_of_the_same_vertex_twice_is_a_duplicate_input() {
    assert_eq!(
        message(&reading_windows(
            "[{ from = \"windows\", output = \"late\" }, { from = \"windows\", output = \"late\", \
             partition = \"broadcast\" }]"
        )),
        "test.toml:12:59: sink \"out\" lists input \"windows\" (side output \"late\") twice: list \
         each input once"
    );
    // The main output and a side output are two inputs.
    job(&reading_windows(
        "[\"windows\", { from = \"windows\", output = \"late\" }]",
    ));
}

#[test]
fn side_outputs_are_written_back_and_are_part_of_the_shape() {
    let text = reading_windows(
        "[{ from = \"windows\", output = \"late\" }, { from = \"windows\", output = \"errors\", \
         partition = \"broadcast\" }]",
    );
    let original = job(&text);
    let written = original.to_toml();
    assert!(written.contains("output = \"late\""), "{written}");
    assert!(written.contains("output = \"errors\""), "{written}");
    let reread = parse(&written).unwrap_or_else(|e| panic!("{e}\n{written}"));
    assert_eq!(
        without_lines(reread.clone()),
        without_lines(original.clone()),
        "{written}"
    );
    assert_eq!(reread.to_toml(), written, "writing is deterministic");
    assert_eq!(reread.fingerprint(), original.fingerprint());

    let main = job(&reading_windows("[\"windows\"]")).fingerprint();
    let late = job(&reading_windows(
        "[{ from = \"windows\", output = \"late\" }]",
    ))
    .fingerprint();
    let errors = job(&reading_windows(
        "[{ from = \"windows\", output = \"errors\" }]",
    ))
    .fingerprint();
    assert_ne!(late, main, "which output an edge reads is shape");
    assert_ne!(late, errors);
}

#[test]
fn a_generator_takes_a_bounded_disorder() {
    let disorder = |text: &str| {
        let VertexKind::Source(SourceKind::Generator(settings)) = &job(text).vertices[0].kind
        else {
            panic!("in is a generator");
        };
        settings.disorder
    };
    assert_eq!(disorder(MINIMAL), 0, "in order by default");
    assert_eq!(disorder(&generator_with("disorder = 250")), 250);
    assert_eq!(
        disorder(&generator_with("disorder = 3600000")),
        MAX_GENERATOR_DISORDER
    );
    assert_eq!(
        message(&generator_with("disorder = 3600001")),
        "test.toml:5:12: `disorder` of source \"in\" = 3600001 is too large: at most 3600000 \
         (one hour, in milliseconds of timestamp; a test of late and out-of-order records needs \
         no more)"
    );
    let (line, message) = syntax(&generator_with("disorder = -1"));
    assert_eq!(line, 5);
    assert!(
        message.starts_with("`disorder`: invalid value"),
        "{message}"
    );
    let (line, problem) = invalid(&file_source_with("disorder = 10"));
    assert_eq!(line, 6);
    assert!(
        matches!(
            problem,
            Problem::KeyNotAllowed {
                key: "disorder",
                ..
            }
        ),
        "{problem:?}"
    );
}

#[test]
fn disorder_is_written_back_when_set_and_is_a_setting_not_shape() {
    let text = generator_with("disorder = 250");
    let written = job(&text).to_toml();
    assert!(written.contains("disorder = 250"), "{written}");
    assert_eq!(without_lines(job(&written)), without_lines(job(&text)));
    assert!(
        !job(MINIMAL).to_toml().contains("disorder"),
        "the default is not written"
    );
    assert_eq!(job(&text).fingerprint(), job(MINIMAL).fingerprint());
}

#[test]
fn max_parallelism_defaults_to_128_and_grows_with_a_wider_job() {
    let minimal = job(MINIMAL);
    assert_eq!(minimal.max_parallelism, None);
    assert!(minimal.vertices.iter().all(|v| v.max_parallelism == 128));
    let wide = job(&generator_with("parallelism = 200"));
    // One and a half times the widest vertex, to a power of two.
    assert!(wide.vertices.iter().all(|v| v.max_parallelism == 512));
    let set = job(&format!("max_parallelism = 16\n{MINIMAL}"));
    assert_eq!(set.max_parallelism, Some(16));
    assert!(set.vertices.iter().all(|v| v.max_parallelism == 16));
    assert_eq!(set.vertex("in").unwrap().key_groups().range(0), 0..16);
}

#[test]
fn max_parallelism_is_at_least_every_parallelism_and_bounded() {
    let narrow = format!("max_parallelism = 2\n{}", generator_with("parallelism = 3"));
    let message = refused(&narrow);
    assert!(
        message.contains("has parallelism 3, more than the job's max_parallelism of 2"),
        "{message}"
    );
    assert!(message.contains("set `max_parallelism`"), "{message}");
    let message = refused(&format!("max_parallelism = 0\n{MINIMAL}"));
    assert!(message.contains("at least 1"), "{message}");
    let message = refused(&format!("max_parallelism = 40000\n{MINIMAL}"));
    assert!(message.contains("at most 32768"), "{message}");
}

#[test]
fn with_parallelism_changes_the_vertices_named_and_validates_the_job_again() {
    let text = "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
                [[operator]]\nname = \"count\"\nmodule = \"count.wasm\"\nparallelism = 2\n\
                inputs = [{ from = \"in\", partition = \"key-hash\" }]\n\
                [[sink]]\nname = \"out\"\ntype = \"blackhole\"\nparallelism = 2\n\
                inputs = [{ from = \"count\", partition = \"forward\" }]\n";
    let before = job(text);
    let both: std::collections::BTreeMap<String, u32> =
        [("count".to_string(), 3), ("out".to_string(), 3)].into();
    let after = before.with_parallelism(&both).unwrap();
    assert_eq!(after.vertex("count").unwrap().parallelism, 3);
    assert_eq!(after.vertex("out").unwrap().parallelism, 3);
    assert_eq!(after.vertex("in").unwrap().parallelism, 1);
    assert_eq!(after.checkpoint, before.checkpoint);
    // The forward edge needs both ends alike: changing one alone makes an invalid job.
    let one = [("count".to_string(), 3)].into();
    let err = before.with_parallelism(&one).unwrap_err();
    assert!(
        matches!(&err, ParallelismError::Invalid(m) if m.contains("needs equal parallelism")),
        "{err}"
    );
    let unknown = [("nope".to_string(), 2)].into();
    assert_eq!(
        before.with_parallelism(&unknown).unwrap_err().to_string(),
        "the job has no vertex `nope`; its vertices are in, count, out"
    );
    let same = [("count".to_string(), 2)].into();
    assert_eq!(
        before.with_parallelism(&same).unwrap_err(),
        ParallelismError::Unchanged
    );
    assert_eq!(
        before.with_parallelism(&Default::default()).unwrap_err(),
        ParallelismError::Nothing
    );
}

/// A job file: `head`, then source `in` (`source`: its type and keys), operators `op0`, `op1`…
/// at `parallelisms`, each reading the vertex before by an explicit rebalance, and a blackhole
/// sink `out` reading the last.
fn rebalanced_chain(head: &str, source: &str, parallelisms: &[u32]) -> String {
    let mut text = format!("{head}name = \"t\"\n[[source]]\nname = \"in\"\n{source}\n");
    let mut from = "in".to_string();
    for (i, parallelism) in parallelisms.iter().enumerate() {
        text += &format!(
            "[[operator]]\nname = \"op{i}\"\nmodule = \"op.wasm\"\nparallelism = {parallelism}\n\
             inputs = [{{ from = \"{from}\", partition = \"rebalance\" }}]\n"
        );
        from = format!("op{i}");
    }
    text + &format!(
        "[[sink]]\nname = \"out\"\ntype = \"blackhole\"\n\
         inputs = [{{ from = \"{from}\", partition = \"rebalance\" }}]\n"
    )
}

/// The message [`Job::with_parallelism`] refuses `changes` with.
#[track_caller]
fn rescale_refused(job: &Job, changes: &[(&str, u32)]) -> String {
    let changes = changes.iter().map(|&(v, p)| (v.to_string(), p)).collect();
    match job.with_parallelism(&changes) {
        Err(ParallelismError::Invalid(message)) => message,
        other => panic!("expected an invalid job, got {other:?}"),
    }
}

#[test]
fn with_parallelism_gives_the_job_its_file_would_give() {
    let generator = "type = \"generator\"";
    let before = job(&rebalanced_chain("", generator, &[2, 2]));
    // 200 subtasks take the job past the default 128 key groups: both ways give it 512.
    for parallelisms in [[1, 1], [3, 2], [200, 256]] {
        let changes = [
            ("op0".to_string(), parallelisms[0]),
            ("op1".to_string(), parallelisms[1]),
        ]
        .into();
        let after = before.with_parallelism(&changes).unwrap();
        assert_eq!(
            after,
            job(&rebalanced_chain("", generator, &parallelisms)),
            "{parallelisms:?}"
        );
    }
    // An input written without `partition` is a rebalance between unequal parallelisms; it
    // stays one when they become equal, where the file's shorthand would now mean forward.
    let shorthand = job(
        "name = \"t\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
                         [[operator]]\nname = \"count\"\nmodule = \"count.wasm\"\n\
                         parallelism = 2\ninputs = [\"in\"]\n\
                         [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"count\"]\n",
    );
    let one = [("count".to_string(), 1)].into();
    let after = shorthand.with_parallelism(&one).unwrap();
    let partitioners: Vec<Partitioner> = after.edges.iter().map(|e| e.partitioner).collect();
    assert_eq!(
        partitioners,
        [Partitioner::Rebalance, Partitioner::Rebalance]
    );
}

#[test]
fn with_parallelism_refuses_what_the_job_file_refuses_in_its_words() {
    let generator = "type = \"generator\"";
    let before = job(&rebalanced_chain("", generator, &[2, 2, 2, 2]));
    let file_says = |head: &str, source: &str, parallelisms: &[u32]| {
        invalid(&rebalanced_chain(head, source, parallelisms))
            .1
            .to_string()
    };
    // At least 1, at most MAX_PARALLELISM.
    assert_eq!(
        rescale_refused(&before, &[("op1", 0)]),
        file_says("", generator, &[2, 0, 2, 2])
    );
    assert_eq!(
        rescale_refused(&before, &[("op1", MAX_PARALLELISM + 1)]),
        file_says("", generator, &[2, MAX_PARALLELISM + 1, 2, 2])
    );
    // At most MAX_SUBTASKS in all.
    let widest = [MAX_PARALLELISM; 4];
    let all: Vec<(&str, u32)> = ["op0", "op1", "op2", "op3"]
        .into_iter()
        .zip(widest)
        .collect();
    let message = rescale_refused(&before, &all);
    assert!(message.contains(&MAX_SUBTASKS.to_string()), "{message}");
    assert_eq!(message, file_says("", generator, &widest));
    // No more subtasks than the key groups the file sets.
    let head = "max_parallelism = 4\n";
    let keyed = job(&rebalanced_chain(head, generator, &[2, 2, 2, 2]));
    assert_eq!(
        rescale_refused(&keyed, &[("op1", 5)]),
        file_says(head, generator, &[2, 5, 2, 2])
    );
    // A file source has one reader.
    let file = |parallelism: u32| {
        format!("type = \"file\"\npath = \"in.txt\"\nparallelism = {parallelism}")
    };
    let reading = job(&rebalanced_chain("", &file(1), &[2, 2, 2, 2]));
    assert_eq!(
        rescale_refused(&reading, &[("in", 2)]),
        file_says("", &file(2), &[2, 2, 2, 2])
    );
}

#[test]
fn checkpoints_on_object_storage_keep_the_lock_local_and_round_trip() {
    let text = format!(
        "{MINIMAL}[checkpoint]\ndirectory = \"s3://bucket/jobs/t/\"\nstorage_retries = 2\n\
         storage_retry_timeout = \"5s\"\nstorage_request_timeout = \"2s\"\n\
         storage_endpoint = \"http://127.0.0.1:9000/\"\n"
    );
    let checkpoint = job(&text).checkpoint;
    let url = checkpoint.object_store.as_ref().expect("an object store");
    assert_eq!(url.to_string(), "s3://bucket/jobs/t");
    assert_eq!(
        checkpoint.storage_root(),
        PathBuf::from("s3://bucket/jobs/t")
    );
    // The lock and the control file stay in the default local directory.
    assert_eq!(checkpoint.directory, PathBuf::from("/jobs/checkpoints/t"));
    let requests = checkpoint.object_store_options.clone();
    assert_eq!(requests.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
    assert_eq!(requests.retries, 2);
    assert_eq!(requests.retry_timeout, Duration::from_secs(5));
    assert_eq!(requests.request_timeout, Duration::from_secs(2));
    let again = job(&text).to_toml();
    assert_eq!(job(&again).checkpoint, checkpoint, "{again}");
    // A local job writes none of the storage keys back.
    assert!(!job(MINIMAL).to_toml().contains("storage_"));
}

#[test]
fn object_storage_keys_and_urls_that_cannot_work_are_refused_with_the_fix() {
    let (line, problem) = invalid(&format!("{MINIMAL}[checkpoint]\nstorage_retries = 3\n"));
    assert_eq!(line, 10);
    let text = problem.to_string();
    assert!(
        text.contains("`checkpoint.storage_retries` does not apply with checkpoints in a local")
            && text.contains("s3://bucket/prefix"),
        "{text}"
    );
    for (url, says) in [
        (
            "hdfs://bucket/p",
            "checkpoints on hdfs:// are not supported",
        ),
        ("s3:///p", "names no bucket"),
        ("s3://b/a//c", "key prefix"),
    ] {
        let (_, problem) = invalid(&format!("{MINIMAL}[checkpoint]\ndirectory = {url:?}\n"));
        let text = problem.to_string();
        assert!(
            text.contains(says) && text.contains("`checkpoint.directory`"),
            "{url}: {text}"
        );
    }
    let (_, problem) = invalid(&format!(
        "{MINIMAL}[checkpoint]\ndirectory = \"gs://b/p\"\nstorage_endpoint = \"http://h:1\"\n"
    ));
    assert!(
        problem.to_string().contains("no endpoint with gs://"),
        "{problem}"
    );
    let (_, problem) = invalid(&format!(
        "{MINIMAL}[checkpoint]\ndirectory = \"s3://b/p\"\nstorage_endpoint = \"127.0.0.1:9000\"\n"
    ));
    let text = problem.to_string();
    assert!(text.contains("http:// or https:// URL"), "{text}");
}
