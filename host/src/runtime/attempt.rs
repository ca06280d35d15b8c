//! One attempt at running the job: every task wired by the execution plan, restored from a
//! checkpoint if there is one, each chain of tasks on a thread of its own.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use tokio::sync::mpsc::UnboundedSender;

use super::error::RunError;
use super::monitor::TaskRole;
use super::plan::{PlannedOutput, PlannedTarget, PlannedTask, plan};
use crate::checkpoint::config::CheckpointMode;
use crate::checkpoint::storage::CheckpointStorage;
use crate::checkpoint::task_state::RestoredState;
use crate::connectors::{build_sink, build_source};
use crate::dataflow::channel::StopSignal;
use crate::dataflow::error::TaskError;
use crate::dataflow::message::{Control, Message};
use crate::dataflow::metrics::TaskMetrics;
use crate::dataflow::operator::WasmOperator;
use crate::dataflow::persist::{Persister, TaskEvent};
use crate::dataflow::processor::{Processor, Source};
use crate::dataflow::router::{OutputEdge, Router, Target};
use crate::dataflow::task::{ProcessingTask, TaskEnv, TaskOutputs, run_processor, run_source};
use crate::ids::TaskId;
use crate::job::{Job, SinkKind, VertexKind, WatermarkStrategy};
use crate::state::keyed::section::KeyedStores;
use crate::wasm::{ImagePolicy, InstanceContext, OperatorModule};
use weir_abi::key_group::KeyGroups;

/// The running tasks of one attempt.
pub(crate) struct Attempt {
    /// Raised to make every task stop as soon as it can.
    pub stop: StopSignal,
    /// The control channel of each thread, by the task heading its chain (the tasks chained
    /// after it hear from it).
    pub controls: Vec<(TaskId, Sender<Control>)>,
    /// Every task, chained or not: each reports its exit.
    pub tasks: Vec<TaskId>,
    /// Each chain's thread.
    pub threads: Vec<JoinHandle<()>>,
    /// Each task's counters.
    pub metrics: Vec<(TaskId, TaskRole, Arc<TaskMetrics>)>,
}

impl Attempt {
    /// Sends `control` to every thread; one that already exited is skipped.
    pub(super) fn broadcast(&self, control: &Control) {
        for (_, tx) in &self.controls {
            let _ = tx.send(control.clone());
        }
    }

    /// Sends `control` to the given tasks, which head their chains (sources always do).
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
    /// The process's keyed state stores, if an operator keeps keyed state on the host.
    pub keyed: Option<&'a Arc<KeyedStores>>,
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

/// What a task runs, before its thread builds it.
enum Work {
    /// A source, built already (building one does no I/O).
    Source {
        source: Box<dyn Source>,
        watermark: Option<WatermarkStrategy>,
    },
    /// An operator or a sink: built on the thread that runs it.
    Processor(Box<ProcessorWork>),
}

/// What an operator or sink task runs, before its thread builds it.
enum ProcessorWork {
    Operator {
        module: OperatorModule,
        ctx: InstanceContext,
        config: Vec<u8>,
        image_policy: ImagePolicy,
        /// Where its keyed state is kept, and the key groups of its operator, if it keeps
        /// some on the host.
        keyed: Option<(Arc<KeyedStores>, KeyGroups)>,
    },
    Sink {
        kind: SinkKind,
        parallelism: u32,
    },
}

/// One task as its thread builds it: what it runs, its wiring, and the tasks chained after it
/// inside its outputs.
struct TaskSetup {
    id: TaskId,
    work: Work,
    metrics: Arc<TaskMetrics>,
    inputs: Vec<Receiver<Message>>,
    outputs: Vec<OutputSetup>,
    restored: Option<RestoredState>,
}

/// An outgoing edge as its thread builds it.
struct OutputSetup {
    planned: PlannedOutput,
    /// The setups of the tasks the edge chains, by id.
    chained: HashMap<TaskId, TaskSetup>,
}

/// A task's setup with its router built: what its thread (or the task it is chained after)
/// runs it with.
struct Built {
    out: TaskOutputs,
    work: Work,
    inputs: Vec<Receiver<Message>>,
    restored: Option<RestoredState>,
}

impl TaskSetup {
    /// Builds the task's router, and in it the tasks chained after it.
    fn build(self, shared: &Shared) -> Result<Built, TaskError> {
        let TaskSetup {
            id,
            work,
            metrics,
            inputs,
            outputs,
            restored,
        } = self;
        let router = build_router(outputs, &metrics, shared)?;
        Ok(Built {
            out: TaskOutputs {
                id,
                persister: shared.persister.clone(),
                metrics,
                router,
            },
            work,
            inputs,
            restored,
        })
    }

    /// This task and every task chained after it, in chain order.
    fn ids(&self, into: &mut Vec<TaskId>) {
        into.push(self.id.clone());
        for output in &self.outputs {
            for target in &output.planned.targets {
                if let PlannedTarget::Chained(id) = target {
                    output.chained[id].ids(into);
                }
            }
        }
    }
}

/// What every task of the attempt shares.
#[derive(Clone)]
struct Shared {
    stop: StopSignal,
    persister: Persister,
    mode: CheckpointMode,
}

fn start_all(
    res: &AttemptResources<'_>,
    mut states: HashMap<TaskId, RestoredState>,
    stop: StopSignal,
) -> Result<Attempt, RunError> {
    let shared = Shared {
        stop: stop.clone(),
        persister: Persister::new(
            Arc::clone(&res.storage),
            res.runtime.clone(),
            res.events.clone(),
        ),
        mode: res.job.checkpoint.mode,
    };
    let mut attempt = Attempt {
        stop,
        controls: Vec::new(),
        tasks: Vec::new(),
        threads: Vec::new(),
        metrics: Vec::new(),
    };
    // Every task's setup; the chained ones are then moved into the outputs of the task they
    // are chained after, downstream first, so that a chain's head holds its whole chain.
    let planned = plan(res.job);
    let mut setups: HashMap<TaskId, TaskSetup> = HashMap::new();
    let mut heads = Vec::new();
    for PlannedTask {
        id,
        inputs,
        outputs,
        chained,
    } in planned
    {
        let vertex = res
            .job
            .vertex(&id.vertex)
            .expect("planned tasks come from the job");
        let metrics = Arc::new(TaskMetrics::default());
        let (role, work) = match &vertex.kind {
            VertexKind::Source(kind) => (
                TaskRole::Source,
                Work::Source {
                    source: build_source(
                        &id.vertex,
                        kind,
                        id.subtask,
                        vertex.parallelism,
                        Arc::clone(&metrics),
                    ),
                    watermark: vertex.watermark,
                },
            ),
            VertexKind::Operator(op) => {
                let module = res
                    .modules
                    .get(&id.vertex)
                    .expect("every operator's module is loaded");
                let keyed = module
                    .capabilities()
                    .keyed_state
                    .then(|| res.keyed.expect("made when an operator keeps keyed state"))
                    .map(|stores| (Arc::clone(stores), vertex.key_groups()));
                (
                    TaskRole::Operator,
                    Work::Processor(Box::new(ProcessorWork::Operator {
                        module: module.clone(),
                        keyed,
                        ctx: InstanceContext {
                            operator: id.vertex.clone(),
                            subtask: id.subtask,
                            parallelism: vertex.parallelism,
                        },
                        config: op.config.clone(),
                        image_policy: ImagePolicy {
                            full_every: op.image_full_every,
                            ..ImagePolicy::default()
                        },
                    })),
                )
            }
            VertexKind::Sink(kind) => (
                TaskRole::Sink,
                Work::Processor(Box::new(ProcessorWork::Sink {
                    kind: kind.clone(),
                    parallelism: vertex.parallelism,
                })),
            ),
        };
        attempt.tasks.push(id.clone());
        attempt
            .metrics
            .push((id.clone(), role, Arc::clone(&metrics)));
        if !chained {
            heads.push(id.clone());
        }
        let restored = states.remove(&id);
        let outputs = outputs
            .into_iter()
            .map(|planned| OutputSetup {
                planned,
                chained: HashMap::new(),
            })
            .collect();
        setups.insert(
            id.clone(),
            TaskSetup {
                id,
                work,
                metrics,
                inputs,
                outputs,
                restored,
            },
        );
    }
    // Tasks come in the job's topological order: going backwards, every task chained after
    // another is complete (its own chain inside) when it is moved into its sender.
    for id in attempt.tasks.iter().rev() {
        let Some(setup) = setups.get(id) else {
            continue;
        };
        let chained: Vec<TaskId> = setup
            .outputs
            .iter()
            .flat_map(|o| &o.planned.targets)
            .filter_map(|t| match t {
                PlannedTarget::Chained(id) => Some(id.clone()),
                PlannedTarget::Channel(_) => None,
            })
            .collect();
        for member in chained {
            let member_setup = setups.remove(&member).expect("a task is chained once");
            let setup = setups.get_mut(id).expect("present above");
            let output = setup
                .outputs
                .iter_mut()
                .find(|o| {
                    o.planned
                        .targets
                        .iter()
                        .any(|t| matches!(t, PlannedTarget::Chained(m) if *m == member))
                })
                .expect("the member is one of its targets");
            output.chained.insert(member, member_setup);
        }
    }
    let mut chains: Vec<(Vec<String>, usize)> = Vec::new();
    for head in heads {
        let setup = setups.remove(&head).expect("a head is not chained");
        let mut chain = Vec::new();
        setup.ids(&mut chain);
        if chain.len() > 1 {
            let vertices: Vec<String> = chain.iter().map(|id| id.vertex.clone()).collect();
            match chains.iter_mut().find(|(v, _)| *v == vertices) {
                Some((_, threads)) => *threads += 1,
                None => chains.push((vertices, 1)),
            }
        }
        let (control_tx, control_rx) = crossbeam_channel::unbounded();
        let shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("weir-{head}"))
            .spawn(move || {
                let persister = shared.persister.clone();
                let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    run_head(setup, control_rx, &shared)
                }))
                .unwrap_or_else(|panic| Err(TaskError::Panic(panic_message(panic.as_ref()))));
                report_exits(&persister, &chain, result);
            })
            .map_err(|e| RunError::Setup(format!("cannot start a thread for task {head}: {e}")))?;
        attempt.controls.push((head, control_tx));
        attempt.threads.push(thread);
    }
    for (vertices, threads) in chains {
        tracing::info!(
            "chained: {} ({threads} thread{})",
            vertices.join(" → "),
            if threads == 1 { "" } else { "s" }
        );
    }
    Ok(attempt)
}

/// Builds the task heading a chain, the tasks chained after it, and runs it until it ends.
fn run_head(
    setup: TaskSetup,
    control: Receiver<Control>,
    shared: &Shared,
) -> Result<(), TaskError> {
    let Built {
        out,
        work,
        inputs,
        restored,
    } = setup.build(shared)?;
    let env = TaskEnv {
        stop: shared.stop.clone(),
        control,
        out,
    };
    match work {
        Work::Source { source, watermark } => run_source(env, source, watermark, restored),
        Work::Processor(work) => {
            let processor =
                build_processor(&env.out.id, *work, &env.out.metrics, restored.is_some())?;
            run_processor(env, processor, inputs, shared.mode, restored)
        }
    }
}

/// The router of a task's `outputs`, the tasks chained after it built into it.
fn build_router(
    outputs: Vec<OutputSetup>,
    metrics: &Arc<TaskMetrics>,
    shared: &Shared,
) -> Result<Router, TaskError> {
    let (mut main, mut side) = (Vec::new(), Vec::new());
    for OutputSetup {
        planned,
        mut chained,
    } in outputs
    {
        let mut targets = Vec::with_capacity(planned.targets.len());
        for target in planned.targets {
            targets.push(match target {
                PlannedTarget::Channel(tx) => Target::Channel(tx),
                PlannedTarget::Chained(id) => {
                    let setup = chained.remove(&id).expect("set up with its sender");
                    Target::Chained(Box::new(build_chained(setup, shared)?))
                }
            });
        }
        let mut edge = OutputEdge::new(planned.partitioner, planned.port, targets);
        if let Some(groups) = planned.key_groups {
            edge = edge.keyed_by(groups);
        }
        match planned.output {
            None => main.push(edge),
            Some(name) => side.push((name, edge)),
        }
    }
    Ok(Router::with_side_outputs(
        main,
        side,
        shared.stop.clone(),
        Arc::clone(metrics),
    ))
}

/// A task chained after another, built on that task's thread; a failure to build it is its own.
fn build_chained(setup: TaskSetup, shared: &Shared) -> Result<ProcessingTask, TaskError> {
    let id = setup.id.clone();
    let build = || {
        let Built {
            out,
            work,
            inputs,
            restored,
        } = setup.build(shared)?;
        debug_assert!(inputs.is_empty(), "a chained task has no input channel");
        let Work::Processor(work) = work else {
            unreachable!("a source has no input, so it is never chained")
        };
        let processor = build_processor(&out.id, *work, &out.metrics, restored.is_some())?;
        ProcessingTask::new(out, processor, 1, shared.mode, restored)
    };
    build().map_err(|e| e.of_chained(&id))
}

/// The processor of an operator or a sink.
fn build_processor(
    id: &TaskId,
    work: ProcessorWork,
    metrics: &Arc<TaskMetrics>,
    restoring: bool,
) -> Result<Box<dyn Processor>, TaskError> {
    match work {
        ProcessorWork::Operator {
            module,
            ctx,
            config,
            image_policy,
            keyed,
        } => {
            // An instance about to be restored from an image takes the image in place
            // (with an instance pool, in the slot its predecessor left resident).
            let mut instance = if restoring {
                module.instantiate_for_restore(ctx, &config)?
            } else {
                module.instantiate(ctx, &config)?
            };
            instance.set_image_policy(image_policy);
            if let Some((stores, groups)) = keyed {
                instance.host_state().keyed = Some(stores.create(&id.vertex, id.subtask, groups)?);
            }
            Ok(Box::new(WasmOperator::new(instance, Arc::clone(metrics))))
        }
        ProcessorWork::Sink { kind, parallelism } => build_sink(
            &id.vertex,
            &kind,
            id.subtask,
            parallelism,
            Arc::clone(metrics),
        ),
    }
}

/// Tells the driver how every task of a chain ended: a failure is the task's that failed (a
/// chained one names itself), and the others of its chain stopped with it.
fn report_exits(persister: &Persister, chain: &[TaskId], result: Result<(), TaskError>) {
    let (failed, error) = match result {
        Err(TaskError::Chained { task, error }) => (task, *error),
        Err(TaskError::Stopped) | Ok(()) => {
            for id in chain {
                let result = match &result {
                    Ok(()) => Ok(()),
                    Err(_) => Err(TaskError::Stopped),
                };
                persister.exited(id.clone(), result);
            }
            return;
        }
        Err(error) => (chain[0].clone(), error),
    };
    // The failure first, so that the driver names it as the cause.
    persister.exited(failed.clone(), Err(error));
    for id in chain.iter().filter(|id| **id != failed) {
        persister.exited(id.clone(), Err(TaskError::Stopped));
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}
