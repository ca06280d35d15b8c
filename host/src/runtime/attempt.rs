//! One attempt at running the job: every task on its own thread, wired by
//! the execution plan, restored from a checkpoint if there is one.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use tokio::sync::mpsc::UnboundedSender;

use super::error::RunError;
use super::monitor::TaskRole;
use super::plan::{PlannedTask, plan};
use crate::checkpoint::storage::CheckpointStorage;
use crate::checkpoint::task_state::RestoredState;
use crate::connectors::{build_sink, build_source};
use crate::dataflow::channel::StopSignal;
use crate::dataflow::metrics::TaskMetrics;
use crate::dataflow::operator::WasmOperator;
use crate::dataflow::persist::{Persister, TaskEvent};
use crate::dataflow::processor::TaskError;
use crate::dataflow::router::{OutputEdge, Router};
use crate::dataflow::task::{Control, TaskEnv, run_processor, run_source};
use crate::ids::TaskId;
use crate::job::{Job, VertexKind};
use crate::wasm::{ImagePolicy, InstanceContext, OperatorModule};

/// The running tasks of one attempt.
pub(crate) struct Attempt {
    /// Raised to make every task stop as soon as it can.
    pub stop: StopSignal,
    /// Each task's control channel.
    pub controls: Vec<(TaskId, Sender<Control>)>,
    /// Each task's thread.
    pub threads: Vec<JoinHandle<()>>,
    /// Each task's counters.
    pub metrics: Vec<(TaskId, TaskRole, Arc<TaskMetrics>)>,
}

impl Attempt {
    /// Sends `control` to every task; a task that already exited is skipped.
    pub(super) fn broadcast(&self, control: &Control) {
        for (_, tx) in &self.controls {
            let _ = tx.send(control.clone());
        }
    }

    /// Sends `control` to the given tasks.
    pub(super) fn send_to(&self, tasks: &[TaskId], control: &Control) {
        for (id, tx) in &self.controls {
            if tasks.contains(id) {
                let _ = tx.send(control.clone());
            }
        }
    }
}

/// Everything an attempt needs that outlives it.
pub(crate) struct AttemptResources<'a> {
    pub job: &'a Job,
    pub modules: &'a HashMap<String, OperatorModule>,
    pub storage: Arc<dyn CheckpointStorage>,
    pub runtime: tokio::runtime::Handle,
    pub events: UnboundedSender<TaskEvent>,
}

/// Starts every task of the job, restoring those with a state in `states`.
/// If one cannot start, those already started are stopped.
pub(crate) fn start(
    res: &AttemptResources<'_>,
    states: HashMap<TaskId, RestoredState>,
) -> Result<Attempt, RunError> {
    let stop = StopSignal::new();
    start_all(res, states, stop.clone()).inspect_err(|_| stop.raise())
}

fn start_all(
    res: &AttemptResources<'_>,
    mut states: HashMap<TaskId, RestoredState>,
    stop: StopSignal,
) -> Result<Attempt, RunError> {
    let persister = Persister::new(
        Arc::clone(&res.storage),
        res.runtime.clone(),
        res.events.clone(),
    );
    let mut attempt = Attempt {
        stop: stop.clone(),
        controls: Vec::new(),
        threads: Vec::new(),
        metrics: Vec::new(),
    };
    for planned in plan(res.job) {
        let PlannedTask {
            id,
            inputs,
            outputs,
        } = planned;
        let vertex = res
            .job
            .vertex(&id.vertex)
            .expect("planned tasks come from the job");
        let metrics = Arc::new(TaskMetrics::default());
        let (mut main, mut side) = (Vec::new(), Vec::new());
        for o in outputs {
            let mut edge = OutputEdge::new(o.partitioner, o.port, o.channels);
            if let Some(groups) = o.key_groups {
                edge = edge.keyed_by(groups);
            }
            match o.output {
                None => main.push(edge),
                Some(name) => side.push((name, edge)),
            }
        }
        let (control_tx, control_rx) = crossbeam_channel::unbounded();
        let env = TaskEnv {
            id: id.clone(),
            stop: stop.clone(),
            control: control_rx,
            persister: persister.clone(),
            metrics: Arc::clone(&metrics),
            router: Router::with_side_outputs(main, side, stop.clone(), Arc::clone(&metrics)),
        };
        let restored = states.remove(&id);
        let mode = res.job.checkpoint.mode;
        let parallelism = vertex.parallelism;
        let role;
        let body: Box<dyn FnOnce(TaskEnv) -> Result<(), TaskError> + Send> = match &vertex.kind {
            VertexKind::Source(kind) => {
                role = TaskRole::Source;
                let source = build_source(
                    &id.vertex,
                    kind,
                    id.subtask,
                    parallelism,
                    Arc::clone(&metrics),
                );
                let watermark = vertex.watermark;
                Box::new(move |env| run_source(env, source, watermark, restored))
            }
            VertexKind::Operator(op) => {
                role = TaskRole::Operator;
                let module = res
                    .modules
                    .get(&id.vertex)
                    .expect("every operator's module is loaded")
                    .clone();
                let config = op.config.clone();
                let image_policy = ImagePolicy {
                    full_every: op.image_full_every,
                    ..ImagePolicy::default()
                };
                let guest_metrics = Arc::clone(&metrics);
                let ctx = InstanceContext {
                    operator: id.vertex.clone(),
                    subtask: id.subtask,
                    parallelism,
                };
                let restoring = restored.is_some();
                Box::new(move |env| {
                    // An instance about to be restored from an image takes the image in place
                    // (with an instance pool, in the slot its predecessor left resident).
                    let mut instance = if restoring {
                        module.instantiate_for_restore(ctx, &config)?
                    } else {
                        module.instantiate(ctx, &config)?
                    };
                    instance.set_image_policy(image_policy);
                    run_processor(
                        env,
                        Box::new(WasmOperator::new(instance, guest_metrics)),
                        inputs,
                        mode,
                        restored,
                    )
                })
            }
            VertexKind::Sink(kind) => {
                role = TaskRole::Sink;
                let kind = kind.clone();
                let subtask = id.subtask;
                let name = id.vertex.clone();
                let sink_metrics = Arc::clone(&metrics);
                Box::new(move |env| {
                    let processor = build_sink(&name, &kind, subtask, parallelism, sink_metrics)?;
                    run_processor(env, processor, inputs, mode, restored)
                })
            }
        };
        let thread_persister = persister.clone();
        let thread_id = id.clone();
        let thread = std::thread::Builder::new()
            .name(format!("weir-{id}"))
            .spawn(move || {
                let result = std::panic::catch_unwind(AssertUnwindSafe(|| body(env)))
                    .unwrap_or_else(|panic| Err(TaskError::Panic(panic_message(panic.as_ref()))));
                thread_persister.exited(thread_id, result);
            })
            .map_err(|e| RunError::Setup(format!("cannot start a thread for task {id}: {e}")))?;
        attempt.controls.push((id.clone(), control_tx));
        attempt.threads.push(thread);
        attempt.metrics.push((id, role, metrics));
    }
    Ok(attempt)
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}
