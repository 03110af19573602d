//! [`StreamGraph`]: stages, typed dependencies, validation and launches.

use super::launch_plan::{launch_plan, WaitKernelPolicy};
use super::spec::{Edge, GraphSpec, StageConfig, StageId};
use crate::cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};
use crate::error::{Error, Result};
use crate::runtime::{
    launch_ordered, programmatic_supported, Context, DeviceBuffer, ErrorSlotBuffer, Event, KernelArgs, Stream,
    StreamOrder,
};
use cusync_shared::layout::{EdgeDesc, StageDesc, TraceEvent, DEBUG_DELAY, DEBUG_SKIP_POST, DEFAULT_TIMEOUT_NS};
use cusync_shared::policy::{Dependency, PolicyKind, SyncPolicy, WaitSchedule};

/// Test-only fault and delay injection for one stage (see `layout::DEBUG_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DebugInjection {
    /// Production behaviour.
    #[default]
    None,
    /// The tile with this linear id never posts: its consumers must time out and report.
    SkipPost(u32),
    /// Every tile waits a pseudo-random 0..ns nanoseconds before posting.
    RandomDelay(u32),
}

/// Device state of a prepared graph.
struct DeviceState {
    counters: DeviceBuffer<u32>,
    start_counts: DeviceBuffer<u32>,
    semaphores: Vec<DeviceBuffer<u32>>,
    /// Per edge, its policy's waits in affine form (derived once, here, not per launch).
    schedules: Vec<WaitSchedule>,
    orders: Vec<Option<DeviceBuffer<u32>>>,
    traces: Vec<Option<DeviceBuffer<u8>>>,
    error: ErrorSlotBuffer,
    streams: Vec<Stream>,
    wait_kernel: Vec<bool>,
    topo: Vec<StageId>,
}

/// A stage descriptor as a kernel argument (passed by value).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct StageDescArg(pub StageDesc);

// SAFETY: StageDesc is #[repr(C)] plain old data (Pod); the device reads it by value with the
// same layout (shared/src/layout.rs asserts it).
unsafe impl DeviceRepr for StageDescArg {}

/// What the launch closure gets for one stage.
pub struct StageLaunch<'a> {
    /// The stage.
    pub stage: StageId,
    /// Its descriptor for this launch (pass it to the kernel by value).
    pub desc: StageDescArg,
    /// The stage's stream.
    pub stream: &'a Stream,
    /// Launch configuration: one block per tile, the stage's threads and shared memory.
    pub config: LaunchConfig,
    /// How the launch is ordered behind the previous one on `stream`
    /// ([`WaitKernelPolicy::Programmatic`] makes it programmatic).
    pub order: StreamOrder,
}

impl StageLaunch<'_> {
    /// Launches `function` as this stage: on its stream, with its configuration and stream
    /// order. `args` points to the kernel's arguments ([`crate::runtime::kernel_arg`]), the
    /// stage descriptor ([`StageLaunch::desc`]) among them where the kernel takes it.
    ///
    /// # Safety
    /// As [`launch_ordered`]: one pointer per parameter of `function`, each to a live value of
    /// its type, whose device addresses stay valid until the graph's run returns.
    pub unsafe fn launch(&self, function: &CudaFunction, args: &mut KernelArgs) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { launch_ordered(self.stream, function, self.config, args, self.order) }
    }
}

/// The outcome of one launch of the graph.
#[derive(Clone, Debug)]
pub struct StreamRun {
    /// Epoch that ran.
    pub epoch: u32,
    /// Device time from the first launch to the end of the last stream to finish, in ms (CUDA
    /// events; with a timing hold, from the end of the hold, so the launches were all queued by
    /// then).
    pub elapsed_ms: f32,
    /// Whether each stage got a wait kernel.
    pub wait_kernels: Vec<bool>,
    /// Per stage, the traced tiles (empty when tracing is off).
    pub traces: Vec<Vec<TraceEvent>>,
}

/// A graph of stream-mode stages.
pub struct StreamGraph<'cx> {
    cx: &'cx Context,
    spec: GraphSpec,
    wait_kernel: WaitKernelPolicy,
    timeout_ns: u64,
    trace: bool,
    consumers_first: bool,
    serialized: bool,
    hold_ns: u64,
    debug: Vec<DebugInjection>,
    epoch: u32,
    state: Option<DeviceState>,
}

impl<'cx> StreamGraph<'cx> {
    /// An empty graph on `cx`.
    pub fn new(cx: &'cx Context) -> Self {
        Self {
            cx,
            spec: GraphSpec::new(),
            wait_kernel: WaitKernelPolicy::Auto,
            timeout_ns: DEFAULT_TIMEOUT_NS,
            trace: false,
            consumers_first: false,
            serialized: false,
            hold_ns: 0,
            debug: Vec::new(),
            epoch: 0,
            state: None,
        }
    }

    /// Adds a stage (checked: see [`GraphSpec::add_stage`]).
    pub fn stage(&mut self, config: StageConfig) -> Result<StageId> {
        self.ensure_unprepared("add a stage")?;
        let id = self.spec.add_stage(config)?;
        self.debug.push(DebugInjection::None);
        Ok(id)
    }

    /// Declares that `consumer` reads `producer`'s output as `dependency`, synchronized by
    /// `policy` (checked before anything is launched: see [`GraphSpec::depend`]).
    /// `producer_tile_n` is the producer's output tile width.
    pub fn depend(
        &mut self,
        producer: StageId,
        consumer: StageId,
        dependency: Dependency,
        policy: PolicyKind,
        producer_tile_n: u32,
    ) -> Result<()> {
        self.ensure_unprepared("add a dependency")?;
        self.spec
            .depend(producer, consumer, dependency, policy, producer_tile_n)
    }

    /// The graph's stages and edges.
    pub fn spec(&self) -> &GraphSpec {
        &self.spec
    }

    /// Sets the bound on every device wait (default 2 s).
    pub fn set_timeout(&mut self, timeout: std::time::Duration) {
        self.timeout_ns = timeout.as_nanos().min(u64::MAX as u128) as u64;
    }

    /// The bound on every device wait, in nanoseconds.
    pub fn timeout_ns(&self) -> u64 {
        self.timeout_ns
    }

    /// Chooses when wait kernels run (default: optimization W decides).
    pub fn set_wait_kernel(&mut self, policy: WaitKernelPolicy) {
        self.wait_kernel = policy;
    }

    /// Records one [`TraceEvent`] per tile (off by default).
    pub fn set_trace(&mut self, on: bool) -> Result<()> {
        self.ensure_unprepared("switch tracing")?;
        self.trace = on;
        Ok(())
    }

    /// Injects a fault or delays into `stage` (tests only).
    pub fn set_debug(&mut self, stage: StageId, injection: DebugInjection) -> Result<()> {
        self.spec.config(stage)?;
        self.debug[stage.0] = injection;
        Ok(())
    }

    /// Launches consumers before their producers (tests of the wait kernel: with it, a consumer
    /// launched first still cannot take the SMs its producer needs). Programmatic runs
    /// ([`WaitKernelPolicy::Programmatic`]) launch in dependency order regardless: a
    /// programmatic launch follows the kernel before it on its stream.
    pub fn set_consumers_first(&mut self, on: bool) {
        self.consumers_first = on;
    }

    /// Launches every stage on one stream, producers first, with no wait kernels (off by
    /// default): each consumer starts after its producers finished, so every wait is met at
    /// its first poll and every post still runs. The protocol's code with no real dependency,
    /// to time against the same kernels without it (StreamSync). Takes precedence over
    /// [`StreamGraph::set_consumers_first`] (a consumer queued before its producer on one
    /// stream could only time out).
    pub fn set_serialized(&mut self, on: bool) {
        self.serialized = on;
    }

    /// Keeps the first stream busy for `ns` of GPU time ([`Context::hold`]) before each run's
    /// start event (0, the default: none), so [`StreamRun::elapsed_ms`] times the GPU's work
    /// and not the host's launch calls. Timing comparisons set [`crate::runtime::TIMING_HOLD_NS`].
    pub fn set_timing_hold(&mut self, ns: u64) {
        self.hold_ns = ns;
    }

    fn ensure_unprepared(&self, what: &str) -> Result<()> {
        if self.state.is_some() {
            return Err(Error::InvalidArgument(format!(
                "cannot {what} after the graph was launched"
            )));
        }
        Ok(())
    }

    /// Whether producer and consumer of `edge` fit in one wave together (optimization W:
    /// then no wait kernel is needed, because no consumer block can keep a producer block out).
    fn fits_one_wave(&self, edge: &Edge) -> Result<bool> {
        let sms = self.cx.info().sm_count;
        let occ = |s: &StageConfig| self.cx.occupancy(s.kernel, s.threads, s.smem_bytes);
        let (p, c) = (
            &self.spec.stages()[edge.producer.0],
            &self.spec.stages()[edge.consumer.0],
        );
        let per_wave = occ(p)?.min(occ(c)?) * sms;
        Ok(p.launch_blocks() + c.launch_blocks() <= per_wave)
    }

    /// Programmatic dependent launch needs an sm_90 device and the sm_90a build of the device
    /// code (whose stages issue `griddepcontrol.launch_dependents`): said before any launch.
    fn check_programmatic(&self) -> Result<()> {
        programmatic_supported(self.cx.info(), crate::kernels::PTX_ARCH)
    }

    fn prepare(&mut self) -> Result<()> {
        if self.state.is_some() {
            return Ok(());
        }
        let topo = self.spec.topological_order()?;
        let n = self.spec.stages().len();
        let mut wait_kernel = vec![false; n];
        for e in self.spec.edges() {
            wait_kernel[e.consumer.0] = match self.wait_kernel {
                WaitKernelPolicy::Always => true,
                WaitKernelPolicy::Never | WaitKernelPolicy::Programmatic => false,
                WaitKernelPolicy::Auto => !self.fits_one_wave(e)?,
            };
        }
        let stages = self.spec.stages();
        let mut semaphores = Vec::with_capacity(self.spec.edges().len());
        let mut schedules = Vec::with_capacity(self.spec.edges().len());
        for e in self.spec.edges() {
            let (p, c) = (stages[e.producer.0].grid, stages[e.consumer.0].grid);
            schedules.push(WaitSchedule::derive(&e.policy, p, c, e.producer_tile_n));
            semaphores.push(
                self.cx
                    .alloc_zeros::<u32>(e.policy.semaphore_count(p, c).max(1) as usize)?,
            );
        }
        // Producers get higher-priority streams than their consumers: the hardware then hands
        // free SMs to pending producer blocks before consumer blocks, whatever the launch order.
        let depth = self.spec.depths()?;
        let mut orders = Vec::with_capacity(n);
        let mut traces = Vec::with_capacity(n);
        let mut streams = Vec::with_capacity(n);
        for (i, s) in stages.iter().enumerate() {
            orders.push(match &s.custom_order {
                Some(o) => Some(self.cx.upload(o)?),
                None => None,
            });
            traces.push(if self.trace {
                Some(trace_buffer(self.cx, s.grid.count() as usize)?)
            } else {
                None
            });
            streams.push(self.cx.new_stream_ranked(depth[i])?);
        }
        self.state = Some(DeviceState {
            counters: self.cx.alloc_zeros(n)?,
            start_counts: self.cx.alloc_zeros(n)?,
            semaphores,
            schedules,
            orders,
            traces,
            error: ErrorSlotBuffer::new(self.cx)?,
            streams,
            wait_kernel,
            topo,
        });
        Ok(())
    }

    fn edge_desc(&self, state: &DeviceState, index: usize) -> EdgeDesc {
        let e = &self.spec.edges()[index];
        let (p, c) = (
            self.spec.stages()[e.producer.0].grid,
            self.spec.stages()[e.consumer.0].grid,
        );
        EdgeDesc {
            sems: state.semaphores[index].addr(),
            num_sems: state.semaphores[index].len() as u32,
            producer_tile_n: e.producer_tile_n,
            policy: e.policy.encode(),
            dependency: e.dependency.encode(),
            producer: p,
            consumer: c,
            // One device: every reader is on this GPU (multi-device graphs: crate::multigpu).
            scope: cusync_shared::placement::Scope::Gpu.encode(),
            _pad: 0,
            schedule: state.schedules[index],
        }
    }

    /// The descriptor of `stage` for the next launch.
    fn desc(&self, state: &DeviceState, stage: StageId) -> StageDesc {
        let s = &self.spec.stages()[stage.0];
        let order = s.order.encode();
        let (post, wait) = (self.spec.post_edge(stage), self.spec.wait_edge(stage));
        StageDesc {
            grid: s.grid,
            stage: stage.0 as u32,
            order: order[0],
            order_param: order[1],
            epoch: self.epoch,
            tile_counter: state.counters.addr_of(stage.0),
            order_buf: state.orders[stage.0].as_ref().map_or(0, |b| b.addr()),
            start_count: state.start_counts.addr_of(stage.0),
            error: state.error.addr(),
            timeout_ns: self.timeout_ns,
            trace: state.traces[stage.0].as_ref().map_or(0, |b| b.addr()),
            post: post.map_or(EdgeDesc::default(), |i| self.edge_desc(state, i)),
            wait: wait.map_or(EdgeDesc::default(), |i| self.edge_desc(state, i)),
            debug_flags: match self.debug[stage.0] {
                DebugInjection::None => 0,
                DebugInjection::SkipPost(_) => DEBUG_SKIP_POST,
                DebugInjection::RandomDelay(_) => DEBUG_DELAY,
            },
            debug_param: match self.debug[stage.0] {
                DebugInjection::None => 0,
                DebugInjection::SkipPost(tile) => tile,
                DebugInjection::RandomDelay(ns) => ns,
            },
        }
    }

    /// Launches every stage once (producers first, each on its own stream, wait kernels where
    /// needed), waits for all of them, and returns the device's timeout report as an error if
    /// any wait expired. `launch` starts one stage's kernel with the given descriptor.
    pub fn run(&mut self, mut launch: impl FnMut(&StageLaunch) -> Result<()>) -> Result<StreamRun> {
        let programmatic = self.wait_kernel == WaitKernelPolicy::Programmatic;
        if programmatic {
            self.check_programmatic()?;
        }
        self.prepare()?;
        let state = self.state.as_ref().expect("prepared above");
        let wait_fn = self.cx.function("stream_wait_kernel")?;
        let first = &state.streams[state.topo[0].0];
        let start: Event = self.cx.new_event()?;
        if self.hold_ns > 0 {
            self.cx.hold(first, self.hold_ns)?;
        }
        first.record(&start)?;
        let plan = launch_plan(
            &state.topo,
            &state.wait_kernel,
            self.serialized,
            programmatic,
            self.consumers_first,
        );
        // The streams this run launches on: the first alone for a one-stream run (serialized
        // or programmatic), so it records, waits on and joins no idle stream's events.
        let used: Vec<&Stream> = if plan.iter().all(|p| p.first_stream) {
            vec![first]
        } else {
            state.streams.iter().collect()
        };
        // The other streams start after `start`; the first is ordered after it already (an
        // event wait on its own stream would only add a front-end step to the timed region).
        for s in used.iter().filter(|s| !std::ptr::eq(**s, first)) {
            s.wait(&start)?;
        }
        for planned in plan {
            let stage = planned.stage;
            let stream = if planned.first_stream {
                first
            } else {
                &state.streams[stage.0]
            };
            if planned.wait_kernel {
                let edge = self
                    .spec
                    .wait_edge(stage)
                    .expect("a wait kernel is only planned for a consumer");
                let producer = self.spec.edges()[edge].producer;
                let (flag, target, id, err, timeout) = (
                    state.start_counts.addr_of(producer.0),
                    self.spec.stages()[producer.0].start_target(self.epoch),
                    stage.0 as u32,
                    state.error.addr(),
                    self.timeout_ns,
                );
                let mut b = stream.raw().launch_builder(&wait_fn);
                b.arg(&flag).arg(&target).arg(&id).arg(&err).arg(&timeout);
                // SAFETY: argument types and order match `stream_wait_kernel`.
                unsafe {
                    b.launch(LaunchConfig {
                        grid_dim: (1, 1, 1),
                        block_dim: (32, 1, 1),
                        shared_mem_bytes: 0,
                    })
                }
                .map_err(Error::driver("launching the wait kernel"))?;
            }
            let s = &self.spec.stages()[stage.0];
            let config = LaunchConfig {
                grid_dim: (s.launch_blocks(), 1, 1),
                block_dim: (s.threads, 1, 1),
                shared_mem_bytes: s.smem_bytes,
            };
            launch(&StageLaunch {
                stage,
                desc: StageDescArg(self.desc(state, stage)),
                stream,
                config,
                order: planned.order,
            })?;
        }
        // Join every stream into the first (later work there comes after the whole graph);
        // the time is to the last stream's end, not to the join (a cross-stream wait the
        // graph's work does not contain).
        let mut done = Vec::with_capacity(used.len());
        for s in &used {
            let e = self.cx.new_event()?;
            s.record(&e)?;
            if !std::ptr::eq(*s, first) {
                first.wait(&e)?;
            }
            done.push(e);
        }
        let sync_result = used.iter().try_for_each(|s| s.synchronize());
        let epoch = self.epoch;
        self.epoch = self.epoch.wrapping_add(1);
        sync_result?;
        if let Err(e) = state.error.check() {
            // A timed-out launch leaves counters and semaphores short of their epoch targets:
            // start the count afresh so the next launch on this graph is correct.
            self.reset()?;
            return Err(e);
        }
        let mut elapsed_ms = 0f32;
        for e in &done {
            elapsed_ms = elapsed_ms.max(start.elapsed_ms(e)?);
        }
        let traces = download_traces(&state.traces)?;
        Ok(StreamRun {
            epoch,
            elapsed_ms,
            wait_kernels: if self.serialized || programmatic {
                vec![false; state.wait_kernel.len()]
            } else {
                state.wait_kernel.clone()
            },
            traces,
        })
    }

    /// Zeroes every counter, flag and semaphore and the error slot, and restarts at epoch 0.
    /// [`StreamGraph::run`] does this itself after a launch that reported a timeout.
    pub fn reset(&mut self) -> Result<()> {
        if let Some(state) = self.state.as_mut() {
            for s in &state.streams {
                s.synchronize()?;
            }
            state.counters.fill(0)?;
            state.start_counts.fill(0)?;
            for sems in &mut state.semaphores {
                sems.fill(0)?;
            }
            state.error.clear()?;
        }
        self.epoch = 0;
        Ok(())
    }

    /// The epoch the next [`StreamGraph::run`] will use.
    pub fn next_epoch(&self) -> u32 {
        self.epoch
    }

    /// The semaphores of edge `index` (in `depend` order), for tests.
    pub fn semaphores(&self, index: usize) -> Option<&DeviceBuffer<u32>> {
        self.state.as_ref().and_then(|s| s.semaphores.get(index))
    }
}

/// A zeroed trace buffer on `cx`'s device: room for one [`TraceEvent`] per tile of `tiles`,
/// as raw bytes (`TraceEvent` lives in `cusync_shared`, so it cannot be a buffer
/// [`Element`](crate::runtime::Element) itself). Read it back with [`download_trace`].
pub fn trace_buffer(cx: &Context, tiles: usize) -> Result<DeviceBuffer<u8>> {
    cx.alloc_zeros::<u8>(tiles * std::mem::size_of::<TraceEvent>())
}

/// The events of one trace buffer (its whole length, one [`TraceEvent`] per 48 bytes).
pub fn download_trace(buffer: &DeviceBuffer<u8>) -> Result<Vec<TraceEvent>> {
    buffer.download_records()
}

/// The events of per-stage trace buffers (one [`TraceEvent`] per tile), empty for stages
/// without one; shared by the single- and multi-device stream graphs.
pub fn download_traces(buffers: &[Option<DeviceBuffer<u8>>]) -> Result<Vec<Vec<TraceEvent>>> {
    buffers
        .iter()
        .map(|t| t.as_ref().map_or_else(|| Ok(Vec::new()), download_trace))
        .collect()
}
