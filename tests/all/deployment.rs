//! The Kubernetes manifests of `deploy/kubernetes/` (docs/DEPLOYMENT.md): every one passes the
//! Kubernetes API's schemas, strictly; the job file the ConfigMap carries is a valid job whose
//! modules the image ships, and one that can run as the StatefulSet's workers; the StatefulSet
//! runs it as the rest of the manifests expect, one worker per pod; and a broken manifest is
//! refused, so the schema check cannot pass vacuously.
//!
//! The validator is PyPI's `kubernetes-validate`, pinned in `tests/kubernetes/requirements.txt`
//! and installed into `tests/kubernetes/.venv` by `scripts/install-kubernetes-validate.sh`, once
//! per test process, the first time a test asks for it. Its environment's PyYAML reads the
//! manifests for the other checks. When it cannot be installed the tests are skipped, loudly —
//! or fail, under `CI=true` ([`validator_or_skip`]).
//!
//! What no test here can check: that a cluster runs the manifests (none is reachable from these
//! machines), and that `deploy/Dockerfile` builds (no Docker daemon either). docs/DEPLOYMENT.md
//! says so.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;
use weir::job::Job;
use weir::job::workers::{Worker, plan};
use weir_tests::guests::{COUNT, DEDUP, SPLIT, WINDOW};

use crate::support::{
    CliOutput, Sandbox, run_program, timed_install, weir_command, workspace_root,
};

/// The Kubernetes versions whose schemas the manifests must pass: the newest the pinned
/// validator ships, and 1.28, the oldest that gives a pod its ordinal as the label
/// `apps.kubernetes.io/pod-index` (each pod's worker index).
const KUBERNETES_VERSIONS: [&str; 2] = ["1.37.0", "1.28.0"];

/// Where the image keeps the example operators (deploy/Dockerfile).
const IMAGE_MODULES: &str = "/opt/weir/modules/";

/// The stages the ConfigMap's word count is cut into when run by workers: `lines → split`, and
/// `count → counts`, joined by a Kafka topic at the key-hash edge. Each serves its own control
/// port, so the StatefulSet and the Service expose this many.
const STAGES: usize = 2;

/// The downward API's path of the pod's ordinal: the worker index.
const POD_INDEX: &str = "metadata.labels['apps.kubernetes.io/pod-index']";

// ---------------------------------------------------------------------------------------------
// The validator

/// The `kubernetes-validate` executable, installed once per test process by
/// `scripts/install-kubernetes-validate.sh` (a no-op when the pinned version is there), or
/// `None` — after saying so, loudly, straight to stderr (the harness hides what `eprintln!`
/// prints in a passing test) — when it cannot be; under `CI=true` that is a failure.
fn validator_or_skip(test: &str) -> Option<&'static Path> {
    static EXE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let exe = EXE.get_or_init(|| timed_install("kubernetes-validate", install_validator));
    match exe {
        Ok(exe) => Some(exe),
        Err(reason) => {
            crate::support::skip(test, &format!("no Kubernetes schema validator: {reason}"));
            None
        }
    }
}

/// Runs `bash scripts/install-kubernetes-validate.sh` (its messages go to this process's
/// stderr) and returns the executable it names on stdout, or why there is none.
fn install_validator() -> Result<PathBuf, String> {
    weir_test_servers::install_with_script(
        &workspace_root(),
        "install-kubernetes-validate.sh",
        "validator",
        "run it by hand and fix what it reports",
    )
}

/// `kubernetes-validate --strict -k VERSION FILES…`: strict refuses a field the schema does
/// not know (a misspelt key), which the API server would otherwise drop without a word.
fn validate(sandbox: &Sandbox, exe: &Path, version: &str, files: &[PathBuf]) -> CliOutput {
    let mut args = vec!["--strict", "-k", version];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    run_program(sandbox, exe, &args, "", &[])
}

// ---------------------------------------------------------------------------------------------
// The manifests

/// Every manifest in `deploy/kubernetes/`, sorted.
fn manifest_files() -> Vec<PathBuf> {
    let dir = workspace_root().join("deploy").join("kubernetes");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {}", dir.display());
    files
}

/// Every document of every manifest, read by the validator environment's PyYAML (the
/// `python` beside the executable) and handed over as JSON.
fn documents(sandbox: &Sandbox, exe: &Path, files: &[PathBuf]) -> Vec<Value> {
    const READ: &str = "import json, sys, yaml\n\
                        docs = [d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f))]\n\
                        json.dump([d for d in docs if d is not None], sys.stdout)\n";
    let python = exe.with_file_name("python");
    let mut args = vec!["-c", READ];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let ran = run_program(sandbox, &python, &args, "", &[]);
    assert_eq!(
        ran.code,
        Some(0),
        "PyYAML could not read the manifests:\n{}",
        ran.stderr
    );
    serde_json::from_str(&ran.stdout).expect("the manifests as JSON")
}

/// The one document of `kind` among `docs`.
fn the<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let mut of_kind = docs.iter().filter(|d| d["kind"] == kind);
    let doc = of_kind
        .next()
        .unwrap_or_else(|| panic!("deploy/kubernetes/ has no {kind}"));
    assert!(
        of_kind.next().is_none(),
        "deploy/kubernetes/ has more than one {kind}: the checks here expect one job"
    );
    doc
}

/// `value` as a string, or a failure naming `what`.
fn text<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value}"))
}

/// The items of the array `value`, or a failure naming `what`.
fn items<'a>(value: &'a Value, what: &str) -> &'a [Value] {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what} is not a list: {value}"))
}

/// The job file the ConfigMap carries under the key the StatefulSet mounts, and where the pod
/// sees it.
fn job_file(docs: &[Value]) -> (String, PathBuf) {
    let pod = &the(docs, "StatefulSet")["spec"]["template"]["spec"];
    let mount = items(&pod["containers"][0]["volumeMounts"], "volumeMounts")
        .iter()
        .find(|m| m["subPath"].is_string())
        .expect("the StatefulSet mounts the job file with subPath");
    let volume = items(&pod["volumes"], "volumes")
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the job file's volume is declared");
    let config_map = the(docs, "ConfigMap");
    assert_eq!(
        volume["configMap"]["name"], config_map["metadata"]["name"],
        "the job file's volume is the ConfigMap of deploy/kubernetes/"
    );
    let key = text(&mount["subPath"], "subPath");
    let toml = text(
        &config_map["data"][key],
        &format!("the ConfigMap's key {key:?} (the StatefulSet's subPath)"),
    );
    (
        toml.to_string(),
        PathBuf::from(text(&mount["mountPath"], "mountPath")),
    )
}

/// The number of workers: the StatefulSet's `replicas`, one worker per pod.
fn workers(docs: &[Value]) -> u32 {
    let replicas = &the(docs, "StatefulSet")["spec"]["replicas"];
    let count = replicas
        .as_u64()
        .unwrap_or_else(|| panic!("the StatefulSet's replicas is not a number: {replicas}"));
    u32::try_from(count)
        .ok()
        .filter(|&n| n >= 1)
        .unwrap_or_else(|| panic!("the StatefulSet's replicas is no number of workers: {count}"))
}

/// What the pod's container runs: its `command`, then its `args` (Kubernetes puts them together
/// so, and expands `$(VAR)` in both).
fn command_line(docs: &[Value]) -> Vec<String> {
    let container = &the(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"][0];
    let mut line = Vec::new();
    for key in ["command", "args"] {
        if container[key].is_null() {
            continue;
        }
        for arg in items(&container[key], key) {
            line.push(text(arg, &format!("an argument of {key}")).to_string());
        }
    }
    line
}

/// The stages worker `index` of `count` runs of `job`, or a failure naming why the job cannot
/// run as workers.
fn stages_of(job: &Job, index: u32, count: u32) -> Vec<Job> {
    // Any id of the job's checkpoints: it names the topics between stages, not their shape.
    plan(job, Worker { index, count }, "0123456789abcdef").unwrap_or_else(|e| {
        panic!("the ConfigMap's job cannot run as worker {index}/{count} (the StatefulSet's): {e}")
    })
}

/// The writable (emptyDir) mount points of the pod's container.
fn writable_mounts(docs: &[Value]) -> Vec<PathBuf> {
    let pod = &the(docs, "StatefulSet")["spec"]["template"]["spec"];
    let empty_dirs: Vec<&Value> = items(&pod["volumes"], "volumes")
        .iter()
        .filter(|v| v["emptyDir"].is_object())
        .map(|v| &v["name"])
        .collect();
    items(&pod["containers"][0]["volumeMounts"], "volumeMounts")
        .iter()
        .filter(|m| empty_dirs.contains(&&m["name"]) && m["readOnly"] != true)
        .map(|m| PathBuf::from(text(&m["mountPath"], "mountPath")))
        .collect()
}

/// The Rust example guests built for these tests, by file name: what `scripts/build-guests.sh`
/// builds for the image, under the same names.
fn guests_by_file_name() -> BTreeMap<String, &'static str> {
    [SPLIT, COUNT, DEDUP, WINDOW]
        .into_iter()
        .map(|path| {
            let name = Path::new(path).file_name().unwrap().to_str().unwrap();
            (name.to_string(), path)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The tests

#[test]
fn every_manifest_passes_the_kubernetes_schemas_strictly() {
    let test = "every_manifest_passes_the_kubernetes_schemas_strictly";
    let Some(exe) = validator_or_skip(test) else {
        return;
    };
    let sandbox = Sandbox::new("deployment-schemas");
    let files = manifest_files();
    let docs = documents(&sandbox, exe, &files);
    for version in KUBERNETES_VERSIONS {
        let ran = validate(&sandbox, exe, version, &files);
        let said = format!("{}{}", ran.stdout, ran.stderr);
        assert_eq!(
            ran.code,
            Some(0),
            "the manifests do not pass the schemas of Kubernetes {version}:\n{said}"
        );
        // A kind the validator has no schema for (a typo in apiVersion, a CRD) is only a
        // warning and exit 0: every resource must have been checked, and passed.
        assert!(
            !said.contains("WARN") && !said.contains("ERROR"),
            "kubernetes-validate warned about the manifests (Kubernetes {version}):\n{said}"
        );
        for doc in &docs {
            let resource = format!(
                "passed for resource {}/{}",
                text(&doc["kind"], "kind").to_lowercase(),
                text(&doc["metadata"]["name"], "metadata.name")
            );
            assert!(
                said.contains(&resource),
                "kubernetes-validate did not say `{resource}` (Kubernetes {version}):\n{said}"
            );
        }
    }
    let kinds: Vec<&str> = docs.iter().map(|d| text(&d["kind"], "kind")).collect();
    for kind in ["ConfigMap", "StatefulSet", "Service", "PodDisruptionBudget"] {
        assert!(
            kinds.contains(&kind),
            "deploy/kubernetes/ has no {kind}: {kinds:?}"
        );
    }
}

#[test]
fn a_broken_manifest_is_refused_with_the_field_named() {
    let test = "a_broken_manifest_is_refused_with_the_field_named";
    let Some(exe) = validator_or_skip(test) else {
        return;
    };
    let sandbox = Sandbox::new("deployment-broken");
    let original = workspace_root().join("deploy/kubernetes/statefulset.yaml");
    let text = fs::read_to_string(&original).unwrap();
    // The shipped StatefulSet passes (the other test checks all of them); each change breaks it.
    let breaks = [
        ("  replicas: 3", "  replicas: \"three\"", "spec.replicas"),
        (
            "terminationGracePeriodSeconds:",
            "terminationGracePeriodSecond:",
            "'terminationGracePeriodSecond' was unexpected",
        ),
    ];
    for (from, to, named) in breaks {
        assert!(
            text.contains(from),
            "statefulset.yaml no longer has `{from}`: update this test"
        );
        let broken = sandbox.join("statefulset.yaml");
        fs::write(&broken, text.replacen(from, to, 1)).unwrap();
        let ran = validate(&sandbox, exe, KUBERNETES_VERSIONS[0], &[broken]);
        let said = format!("{}{}", ran.stdout, ran.stderr);
        assert_eq!(
            ran.code,
            Some(1),
            "kubernetes-validate let `{to}` through:\n{said}"
        );
        assert!(
            said.contains("did not validate for resource statefulset/weir-wordcount")
                && said.contains(named),
            "kubernetes-validate refused `{to}` without naming {named}:\n{said}"
        );
    }
}

#[test]
fn the_configmaps_job_file_is_a_valid_job_of_the_images_modules() {
    let test = "the_configmaps_job_file_is_a_valid_job_of_the_images_modules";
    let Some(exe) = validator_or_skip(test) else {
        return;
    };
    let sandbox = Sandbox::new("deployment-job");
    let docs = documents(&sandbox, exe, &manifest_files());
    let (toml, pod_path) = job_file(&docs);
    let pod_dir = pod_path.parent().unwrap();

    // As the pod reads it (validation reads nothing from disk).
    let job = Job::from_str(&toml, pod_dir, &pod_path.display().to_string())
        .unwrap_or_else(|e| panic!("the ConfigMap's job file is not a valid job: {e}"));
    let store = job
        .checkpoint
        .object_store
        .as_ref()
        .expect("the job keeps its checkpoints on object storage");
    assert!(store.to_string().starts_with("s3://"), "{store}");
    // Its local directory (the lock, _control.json) is created beside the job file: on a
    // writable volume, as the root filesystem is read-only.
    let writable = writable_mounts(&docs);
    assert!(
        writable
            .iter()
            .any(|mount| job.checkpoint.directory.starts_with(mount)),
        "the job's local directory {} is on none of the pod's writable volumes {writable:?}",
        job.checkpoint.directory.display()
    );

    // It can run as the StatefulSet's workers (only Kafka, no broadcast edge, no watermarks,
    // enough key groups): every worker cuts it into the same stages, each checkpointing on S3
    // under a prefix of its own and keeping its lock and _control.json on a writable volume.
    let count = workers(&docs);
    for index in 0..count {
        let stages = stages_of(&job, index, count);
        assert_eq!(
            stages.len(),
            STAGES,
            "worker {index}/{count} runs {} stages of the ConfigMap's job, not {STAGES}",
            stages.len()
        );
        for (k, stage) in stages.iter().enumerate() {
            let own = format!("worker-{index}-of-{count}/stage-{k}");
            let store = stage.checkpoint.object_store.as_ref().unwrap().to_string();
            assert!(
                store.starts_with("s3://") && store.trim_end_matches('/').ends_with(&own),
                "worker {index}/{count}, stage {k}: checkpoints in {store}"
            );
            assert!(
                stage.checkpoint.directory.ends_with(&own)
                    && writable
                        .iter()
                        .any(|mount| stage.checkpoint.directory.starts_with(mount)),
                "worker {index}/{count}, stage {k}: the local directory {} is not its own on a \
                 writable volume {writable:?}",
                stage.checkpoint.directory.display()
            );
        }
        // The job's own vertices: the sources' stage first, the sinks' last.
        let has = |k: usize, name: &str| stages[k].vertices.iter().any(|v| v.name == name);
        for vertex in &job.vertices {
            assert!(
                (0..STAGES).any(|k| has(k, &vertex.name)),
                "worker {index}/{count} runs no `{}`",
                vertex.name
            );
        }
        for vertex in job.sources() {
            assert!(has(0, &vertex.name), "`{}` is not in stage 0", vertex.name);
        }
        for vertex in job.sinks() {
            assert!(
                has(STAGES - 1, &vertex.name),
                "`{}` is not in the last stage",
                vertex.name
            );
        }
    }

    // Every module is one the image ships: built by scripts/build-guests.sh, whose crates the
    // tests build too, under the same file names.
    let build_guests = fs::read_to_string(workspace_root().join("scripts/build-guests.sh"))
        .expect("scripts/build-guests.sh");
    let guests = guests_by_file_name();
    let mut local = toml.clone();
    let mut modules = Vec::new();
    for vertex in job.operators() {
        let module = &vertex.operator().unwrap().module;
        let module = module.to_str().unwrap();
        let file = module.strip_prefix(IMAGE_MODULES).unwrap_or_else(|| {
            panic!(
                "operator {:?}: module {module} is not in the image's {IMAGE_MODULES}",
                vertex.name
            )
        });
        let package = file
            .strip_suffix(".wasm")
            .map(|crate_name| crate_name.replace('_', "-"))
            .unwrap();
        assert!(
            build_guests.contains(&format!("-p {package}")),
            "operator {:?}: {file} is not built by scripts/build-guests.sh, so the image lacks it",
            vertex.name
        );
        let built = guests.get(file).unwrap_or_else(|| {
            panic!(
                "operator {:?}: no test guest is named {file}: {guests:?}",
                vertex.name
            )
        });
        local = local.replace(module, built);
        modules.push(*built);
    }
    assert!(!modules.is_empty(), "the job has no operators");

    // With those modules where the tests built them: what `weir run` checks before it starts.
    let path = sandbox.join("job.toml");
    fs::write(&path, &local).unwrap();
    Job::load(&path).unwrap_or_else(|e| panic!("the job file with the built modules: {e}"));
    for module in modules {
        let out = weir_command(&sandbox, &["validate", module], "", &[("RUST_LOG", "warn")]);
        out.assert_code(0, &format!("`weir validate {module}`"));
    }
}

#[test]
fn the_statefulset_runs_the_job_as_the_other_manifests_expect() {
    let test = "the_statefulset_runs_the_job_as_the_other_manifests_expect";
    let Some(exe) = validator_or_skip(test) else {
        return;
    };
    let sandbox = Sandbox::new("deployment-pod");
    let docs = documents(&sandbox, exe, &manifest_files());
    let (toml, pod_path) = job_file(&docs);
    let job = Job::from_str(&toml, pod_path.parent().unwrap(), "job.toml")
        .unwrap_or_else(|e| panic!("the ConfigMap's job file is not a valid job: {e}"));
    let set = the(&docs, "StatefulSet");
    let pod = &set["spec"]["template"];
    let container = &pod["spec"]["containers"][0];

    // One worker per pod: `replicas` is the N of `--worker $(WEIR_WORKER_INDEX)/N`, the pod's
    // ordinal its index, and the workers start together.
    let count = workers(&docs);
    assert_eq!(
        set["spec"]["podManagementPolicy"], "Parallel",
        "the workers start and stop together"
    );
    let env = items(&container["env"], "env");
    let index = env
        .iter()
        .find(|e| e["name"] == "WEIR_WORKER_INDEX")
        .expect("WEIR_WORKER_INDEX is set");
    assert_eq!(
        index["valueFrom"]["fieldRef"]["fieldPath"], POD_INDEX,
        "the worker index is the pod's ordinal: {index}"
    );

    // `weir run` of the mounted job file, as worker $(WEIR_WORKER_INDEX) of `replicas`,
    // restoring, with flags `weir run` has.
    let command = command_line(&docs);
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    assert_eq!(
        command[..3],
        ["weir", "run", pod_path.to_str().unwrap()],
        "{command:?}"
    );
    let worker = format!("$(WEIR_WORKER_INDEX)/{count}");
    assert!(
        command
            .windows(2)
            .any(|w| w == ["--worker", worker.as_str()]),
        "the command runs worker `{worker}` (N the StatefulSet's {count} replicas): {command:?}"
    );
    assert_eq!(
        command.iter().filter(|a| **a == "--worker").count(),
        1,
        "{command:?}"
    );
    assert!(
        command.windows(2).any(|w| w == ["--restore", "latest"]),
        "{command:?}"
    );
    assert!(command.contains(&"--savepoint-on-stop"), "{command:?}");
    let help = weir_command(&sandbox, &["run", "--help"], "", &[]);
    for flag in command.iter().filter(|a| a.starts_with("--")) {
        assert!(
            help.stdout.contains(flag),
            "`weir run` has no {flag}:\n{}",
            help.stdout
        );
    }

    // Each stage's control port (the job file's, + K for stage K) is the container's and the
    // Service's; the probes use stage 0's.
    let port = job.control.address.port();
    assert!(
        job.control.address.ip().is_unspecified(),
        "the endpoint listens on every interface, for the Service: {}",
        job.control.address
    );
    let stages = stages_of(&job, 0, count).len();
    assert_eq!(stages, STAGES, "the stages of worker 0/{count}");
    let ports = items(&container["ports"], "ports");
    let service = the(&docs, "Service");
    assert_eq!(service["spec"]["clusterIP"], "None", "a headless Service");
    assert_eq!(set["spec"]["serviceName"], service["metadata"]["name"]);
    let service_ports = items(&service["spec"]["ports"], "the Service's ports");
    assert_eq!(
        ports.len(),
        stages,
        "one container port per stage: {ports:?}"
    );
    assert_eq!(
        service_ports.len(),
        stages,
        "one Service port per stage: {service_ports:?}"
    );
    let mut names = Vec::new();
    for stage in 0..stages {
        let port = port + u16::try_from(stage).unwrap();
        let control = ports
            .iter()
            .find(|p| p["containerPort"] == port)
            .unwrap_or_else(|| {
                panic!("no containerPort {port} (stage {stage}'s control port): {ports:?}")
            });
        let name = &control["name"];
        assert!(
            service_ports
                .iter()
                .any(|p| p["port"] == port && (p["targetPort"] == *name || p["targetPort"] == port)),
            "the Service exposes stage {stage}'s control port {port} ({name}): {service_ports:?}"
        );
        names.push(name.clone());
    }
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        assert_eq!(
            container[probe]["tcpSocket"]["port"], names[0],
            "{probe}: a TCP connection to stage 0's control port (an HTTP probe has no token)"
        );
    }

    // The Service and the budget select the pod.
    let labels = pod["metadata"]["labels"].as_object().unwrap();
    let budget = the(&docs, "PodDisruptionBudget");
    for (what, selector) in [
        ("Service", &service["spec"]["selector"]),
        (
            "PodDisruptionBudget",
            &budget["spec"]["selector"]["matchLabels"],
        ),
        ("StatefulSet", &set["spec"]["selector"]["matchLabels"]),
    ] {
        for (key, value) in selector.as_object().unwrap() {
            assert_eq!(
                labels.get(key),
                Some(value),
                "the {what} selects {key}={value}, which the pod does not have"
            );
        }
    }
    assert_eq!(budget["spec"]["maxUnavailable"], 1);

    // A read-only root: the module cache is on a writable volume too.
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    let cache = env
        .iter()
        .find(|e| e["name"] == "WEIR_CACHE_DIR")
        .expect("WEIR_CACHE_DIR is set");
    let cache = Path::new(text(&cache["value"], "WEIR_CACHE_DIR"));
    let writable = writable_mounts(&docs);
    assert!(
        writable.iter().any(|mount| cache.starts_with(mount)),
        "the module cache {} is on none of the writable volumes {writable:?}",
        cache.display()
    );
    // The token every request needs comes from a Secret.
    let token = env
        .iter()
        .find(|e| e["name"] == "WEIR_CONTROL_TOKEN")
        .expect("WEIR_CONTROL_TOKEN is set");
    assert!(
        token["valueFrom"]["secretKeyRef"]["name"].is_string(),
        "{token}"
    );
}
