//! [`MultiStreamGraph`]: stream mode with stages bound to logical devices.
//!
//! The same stage kernels, descriptors and counting rules as [`crate::stream::StreamGraph`]
//! (the graph is described and checked by the same [`GraphSpec`]); what differs is where
//! things live, decided by the [placement planner](super::placement):
//!
//! * each stage runs on its device's context, on its own stream (producers on higher-priority
//!   streams than their consumers, per device), with its tile counter, start count and error
//!   slot in its device's memory;
//! * each edge's semaphores live on the consumer's device (the consumer polls them; the
//!   producer's post is one remote add), and so does the producer's output, which the caller
//!   allocates on [`MultiStreamGraph::output_device`];
//! * an edge between two logical devices posts with `fence.sc.sys` + `red.relaxed.sys` and
//!   waits with `ld.acquire.sys` (`EdgeDesc::scope`); a same-device edge stays at GPU scope;
//! * the wait kernel (which keeps a consumer from taking the SMs its producer needs) is planned
//!   only where producer and consumer share a GPU: across GPUs there is nothing to take.

use super::devices::DeviceSet;
use super::placement::{place, Link, Placement, StageBinding};
use crate::cudarc::driver::{LaunchConfig, PushKernelArg};
use crate::error::{Error, Result};
use crate::runtime::{Context, DeviceBuffer, ErrorSlotBuffer, Event, Stream};
use crate::stream::{GraphSpec, StageConfig, StageDescArg, StageId, WaitKernelPolicy};
use cusync_shared::layout::{EdgeDesc, StageDesc, TraceEvent, DEFAULT_TIMEOUT_NS};
use cusync_shared::placement::{Piece, Scope};
use cusync_shared::policy::{Dependency, PolicyKind, SyncPolicy, WaitSchedule};

/// What the launch closure gets for one stage.
pub struct MultiStageLaunch<'a> {
    /// The stage.
    pub stage: StageId,
    /// The logical device it runs on.
    pub device: usize,
    /// That device's context (for the kernel's function).
    pub context: &'a Context,
    /// Its descriptor for this launch (pass it to the kernel by value).
    pub desc: StageDescArg,
    /// The stage's stream (on `context`).
    pub stream: &'a Stream,
    /// [`StageConfig::launch_blocks`] blocks (one per tile, or the persistent blocks), the
    /// stage's threads and shared memory.
    pub config: LaunchConfig,
}

/// The outcome of one launch of a [`MultiStreamGraph`].
#[derive(Clone, Debug)]
pub struct MultiStreamRun {
    /// Epoch that ran.
    pub epoch: u32,
    /// Device time from the first launch to the last stage's end, in ms (CUDA events on the
    /// first stage's device; the other devices' streams are joined into it).
    pub elapsed_ms: f32,
    /// Whether each stage got a wait kernel.
    pub wait_kernels: Vec<bool>,
    /// Scope of each edge's posts and waits, in `depend` order.
    pub scopes: Vec<Scope>,
    /// Per stage, one event per tile when tracing is on ([`MultiStreamGraph::set_trace`]),
    /// else empty. Times are each GPU's `%globaltimer`: the driver keeps the GPUs' timers on
    /// the host clock, so stages on different GPUs share one time axis up to that clock's
    /// skew (about a microsecond).
    pub traces: Vec<Vec<TraceEvent>>,
}

struct State {
    placement: Placement,
    counters: Vec<DeviceBuffer<u32>>,
    start_counts: Vec<DeviceBuffer<u32>>,
    errors: Vec<ErrorSlotBuffer>,
    semaphores: Vec<DeviceBuffer<u32>>,
    /// Per edge, its policy's waits in affine form (derived once, not per launch).
    schedules: Vec<WaitSchedule>,
    orders: Vec<Option<DeviceBuffer<u32>>>,
    /// Per stage, its trace buffer on its own device (tracing on).
    traces: Vec<Option<DeviceBuffer<u8>>>,
    streams: Vec<Stream>,
    wait_kernel: Vec<bool>,
}

/// A stream-mode graph whose stages run on the logical devices of a [`DeviceSet`].
pub struct MultiStreamGraph<'d> {
    devices: &'d DeviceSet,
    spec: GraphSpec,
    stage_devices: Vec<usize>,
    wait_kernel: WaitKernelPolicy,
    timeout_ns: u64,
    trace: bool,
    epoch: u32,
    state: Option<State>,
}

impl<'d> MultiStreamGraph<'d> {
    /// An empty graph over `devices`.
    pub fn new(devices: &'d DeviceSet) -> Self {
        Self {
            devices,
            spec: GraphSpec::new(),
            stage_devices: Vec::new(),
            wait_kernel: WaitKernelPolicy::Auto,
            timeout_ns: DEFAULT_TIMEOUT_NS,
            trace: false,
            epoch: 0,
            state: None,
        }
    }

    /// Switches per-tile tracing on or off (before the first launch): every stage writes one
    /// [`TraceEvent`] per tile into a buffer on its own device, returned by each run.
    pub fn set_trace(&mut self, on: bool) -> Result<()> {
        self.ensure_unprepared("switch tracing")?;
        self.trace = on;
        Ok(())
    }

    /// Adds a stage on logical device `device` (checked: the device exists, and
    /// [`GraphSpec::add_stage`]).
    pub fn stage(&mut self, config: StageConfig, device: usize) -> Result<StageId> {
        self.ensure_unprepared("add a stage")?;
        if device >= self.devices.len() {
            return Err(Error::InvalidArgument(format!(
                "stage `{}` is bound to device {device}, but only {} device(s) are open (0..{})",
                config.name,
                self.devices.len(),
                self.devices.len()
            )));
        }
        let id = self.spec.add_stage(config)?;
        self.stage_devices.push(device);
        Ok(id)
    }

    /// Declares that `consumer` reads `producer`'s output (see [`GraphSpec::depend`]), and
    /// checks the edge's placement now: a producer that cannot reach its consumer's GPU is
    /// refused here, before anything is allocated.
    pub fn depend(
        &mut self,
        producer: StageId,
        consumer: StageId,
        dependency: Dependency,
        policy: PolicyKind,
        producer_tile_n: u32,
    ) -> Result<()> {
        self.ensure_unprepared("add a dependency")?;
        let before = self.spec.clone();
        self.spec
            .depend(producer, consumer, dependency, policy, producer_tile_n)?;
        if let Err(e) = self.plan() {
            self.spec = before; // keep the graph as it was
            return Err(e);
        }
        Ok(())
    }

    /// The device set the graph's stages run on.
    pub fn devices(&self) -> &'d DeviceSet {
        self.devices
    }

    /// The stages and edges.
    pub fn spec(&self) -> &GraphSpec {
        &self.spec
    }

    /// The placement of the graph as it stands (checked against the devices' topology).
    pub fn plan(&self) -> Result<Placement> {
        let stages: Vec<StageBinding> = self
            .spec
            .stages()
            .iter()
            .zip(&self.stage_devices)
            .map(|(s, &device)| StageBinding {
                name: s.name.clone(),
                device,
            })
            .collect();
        let edges: Vec<(usize, usize)> = self.spec.edges().iter().map(|e| (e.producer.0, e.consumer.0)).collect();
        place(self.devices.topology(), &stages, &edges).map_err(|e| Error::InvalidArgument(format!("placement: {e}")))
    }

    /// The logical device where `stage`'s output must be allocated (its consumer's device).
    pub fn output_device(&self, stage: StageId) -> Result<usize> {
        self.spec.config(stage)?;
        Ok(self.plan()?.output_device(stage.0))
    }

    /// The logical device `stage` runs on.
    pub fn device(&self, stage: StageId) -> Result<usize> {
        self.spec.config(stage)?;
        Ok(self.stage_devices[stage.0])
    }

    /// Sets the bound on every device wait (default 2 s).
    pub fn set_timeout(&mut self, timeout: std::time::Duration) {
        self.timeout_ns = timeout.as_nanos().min(u64::MAX as u128) as u64;
    }

    /// The bound on every device wait, in nanoseconds.
    pub fn timeout_ns(&self) -> u64 {
        self.timeout_ns
    }

    /// Chooses when wait kernels run on same-GPU edges (default: optimization W decides);
    /// edges between GPUs never get one. [`WaitKernelPolicy::Programmatic`] is for one-GPU
    /// graphs: the first launch says so.
    pub fn set_wait_kernel(&mut self, policy: WaitKernelPolicy) {
        self.wait_kernel = policy;
    }

    fn ensure_unprepared(&self, what: &str) -> Result<()> {
        if self.state.is_some() {
            return Err(Error::InvalidArgument(format!(
                "cannot {what} after the graph was launched"
            )));
        }
        Ok(())
    }

    /// Whether producer and consumer of an edge on one GPU fit in one wave together (counting
    /// the blocks each launches: one per tile, or its persistent blocks).
    fn fits_one_wave(&self, cx: &Context, p: &StageConfig, c: &StageConfig) -> Result<bool> {
        let occ = |s: &StageConfig| cx.occupancy(s.kernel, s.threads, s.smem_bytes);
        let per_wave = occ(p)?.min(occ(c)?) * cx.info().sm_count;
        Ok(p.launch_blocks() + c.launch_blocks() <= per_wave)
    }

    fn prepare(&mut self) -> Result<()> {
        if self.state.is_some() {
            return Ok(());
        }
        if self.wait_kernel == WaitKernelPolicy::Programmatic {
            return Err(Error::InvalidArgument(
                "programmatic dependent launch orders kernels on one stream of one GPU; a \
                 multi-GPU graph takes WaitKernelPolicy::Auto, Always or Never"
                    .into(),
            ));
        }
        let placement = self.plan()?;
        let stages = self.spec.stages();
        let n = stages.len();
        let cx = |d: usize| self.devices.context(d);
        let mut wait_kernel = vec![false; n];
        for (e, placed) in self.spec.edges().iter().zip(placement.edges()) {
            let shares_gpu = matches!(placed.link, Link::Same | Link::Local);
            wait_kernel[e.consumer.0] = shares_gpu
                && match self.wait_kernel {
                    WaitKernelPolicy::Always => true,
                    WaitKernelPolicy::Never | WaitKernelPolicy::Programmatic => false,
                    WaitKernelPolicy::Auto => {
                        let c = cx(placed.devices.consumer as usize)?;
                        !self.fits_one_wave(c, &stages[e.producer.0], &stages[e.consumer.0])?
                    }
                };
        }
        let mut semaphores = Vec::with_capacity(self.spec.edges().len());
        let mut schedules = Vec::with_capacity(self.spec.edges().len());
        for (e, placed) in self.spec.edges().iter().zip(placement.edges()) {
            let (p, c) = (stages[e.producer.0].grid, stages[e.consumer.0].grid);
            schedules.push(WaitSchedule::derive(&e.policy, p, c, e.producer_tile_n));
            let count = e.policy.semaphore_count(p, c).max(1) as usize;
            semaphores.push(cx(placed.device_of(Piece::Semaphores))?.alloc_zeros::<u32>(count)?);
        }
        let depth = self.spec.depths()?;
        let (mut counters, mut start_counts, mut errors) = (Vec::new(), Vec::new(), Vec::new());
        let (mut orders, mut streams, mut traces) = (Vec::new(), Vec::new(), Vec::new());
        for (i, s) in stages.iter().enumerate() {
            let c = cx(self.stage_devices[i])?;
            counters.push(c.alloc_zeros::<u32>(1)?);
            start_counts.push(c.alloc_zeros::<u32>(1)?);
            errors.push(ErrorSlotBuffer::new(c)?);
            orders.push(match &s.custom_order {
                Some(o) => Some(c.upload(o)?),
                None => None,
            });
            streams.push(c.new_stream_ranked(depth[i])?);
            traces.push(if self.trace {
                Some(c.alloc_zeros::<u8>(s.grid.count() as usize * std::mem::size_of::<TraceEvent>())?)
            } else {
                None
            });
        }
        // What each stage's kernels dereference must be reachable from its GPU (a clear error
        // here beats an illegal address at the synchronization).
        let check = |d: usize, addr: u64, what: String| self.devices.check_access(d, addr, &what);
        for (i, s) in stages.iter().enumerate() {
            let d = self.stage_devices[i];
            check(d, counters[i].addr(), format!("stage `{}`'s tile counter", s.name))?;
            check(d, start_counts[i].addr(), format!("stage `{}`'s start count", s.name))?;
            check(d, errors[i].addr(), format!("stage `{}`'s error slot", s.name))?;
            if let Some(o) = &orders[i] {
                check(d, o.addr(), format!("stage `{}`'s tile order", s.name))?;
            }
            if let Some(t) = &traces[i] {
                check(d, t.addr(), format!("stage `{}`'s trace buffer", s.name))?;
            }
        }
        for (k, (e, placed)) in self.spec.edges().iter().zip(placement.edges()).enumerate() {
            let name = format!(
                "semaphores of edge `{}` -> `{}`",
                stages[e.producer.0].name, stages[e.consumer.0].name
            );
            check(placed.devices.producer as usize, semaphores[k].addr(), name.clone())?;
            check(placed.devices.consumer as usize, semaphores[k].addr(), name)?;
            if wait_kernel[e.consumer.0] {
                let what = format!("start count of `{}` (wait kernel)", stages[e.producer.0].name);
                check(
                    placed.devices.consumer as usize,
                    start_counts[e.producer.0].addr(),
                    what,
                )?;
            }
        }
        self.state = Some(State {
            placement,
            counters,
            start_counts,
            errors,
            semaphores,
            schedules,
            orders,
            traces,
            streams,
            wait_kernel,
        });
        Ok(())
    }

    fn edge_desc(&self, state: &State, index: usize) -> EdgeDesc {
        let e = &self.spec.edges()[index];
        let stages = self.spec.stages();
        EdgeDesc {
            sems: state.semaphores[index].addr(),
            num_sems: state.semaphores[index].len() as u32,
            producer_tile_n: e.producer_tile_n,
            policy: e.policy.encode(),
            dependency: e.dependency.encode(),
            producer: stages[e.producer.0].grid,
            consumer: stages[e.consumer.0].grid,
            scope: state.placement.edges()[index].scope().encode(),
            _pad: 0,
            schedule: state.schedules[index],
        }
    }

    fn desc(&self, state: &State, stage: StageId) -> StageDesc {
        let s = &self.spec.stages()[stage.0];
        let order = s.order.encode();
        let (post, wait) = (self.spec.post_edge(stage), self.spec.wait_edge(stage));
        StageDesc {
            grid: s.grid,
            stage: stage.0 as u32,
            order: order[0],
            order_param: order[1],
            epoch: self.epoch,
            tile_counter: state.counters[stage.0].addr(),
            order_buf: state.orders[stage.0].as_ref().map_or(0, |b| b.addr()),
            start_count: state.start_counts[stage.0].addr(),
            error: state.errors[stage.0].addr(),
            timeout_ns: self.timeout_ns,
            trace: state.traces[stage.0].as_ref().map_or(0, |b| b.addr()),
            post: post.map_or(EdgeDesc::default(), |i| self.edge_desc(state, i)),
            wait: wait.map_or(EdgeDesc::default(), |i| self.edge_desc(state, i)),
            debug_flags: 0,
            debug_param: 0,
        }
    }

    /// Launches every stage once (producers first, each on its own stream on its device, wait
    /// kernels where planned), waits for all devices, and returns the first timeout any device
    /// reported as an error. `launch` starts one stage's kernel with the given descriptor.
    pub fn run(&mut self, mut launch: impl FnMut(&MultiStageLaunch) -> Result<()>) -> Result<MultiStreamRun> {
        if self.spec.stages().is_empty() {
            return Err(Error::InvalidArgument("the graph has no stage to launch".into()));
        }
        self.prepare()?;
        let state = self.state.as_ref().expect("prepared above");
        let order: Vec<StageId> = state.placement.order().iter().map(|&i| StageId(i)).collect();
        let first_stage = order[0];
        let first_cx = self.devices.context(self.stage_devices[first_stage.0])?;
        let first = &state.streams[first_stage.0];
        let (start, end): (Event, Event) = (first_cx.new_event()?, first_cx.new_event()?);
        first.record(&start)?;
        for s in &state.streams {
            s.wait(&start)?;
        }
        for &stage in &order {
            let device = self.stage_devices[stage.0];
            let context = self.devices.context(device)?;
            let stream = &state.streams[stage.0];
            if state.wait_kernel[stage.0] {
                let edge = self
                    .spec
                    .wait_edge(stage)
                    .expect("a wait kernel is only planned for a consumer");
                let producer = self.spec.edges()[edge].producer;
                let (flag, target, id, err, timeout) = (
                    state.start_counts[producer.0].addr(),
                    self.spec.stages()[producer.0].start_target(self.epoch),
                    stage.0 as u32,
                    state.errors[stage.0].addr(),
                    self.timeout_ns,
                );
                let f = context.function("stream_wait_kernel")?;
                let mut b = stream.raw().launch_builder(&f);
                b.arg(&flag).arg(&target).arg(&id).arg(&err).arg(&timeout);
                // SAFETY: argument types and order match `stream_wait_kernel`; the flag is in
                // the memory of the GPU both stages run on.
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
            launch(&MultiStageLaunch {
                stage,
                device,
                context,
                desc: StageDescArg(self.desc(state, stage)),
                stream,
                config: LaunchConfig {
                    grid_dim: (s.launch_blocks(), 1, 1),
                    block_dim: (s.threads, 1, 1),
                    shared_mem_bytes: s.smem_bytes,
                },
            })?;
        }
        for (i, s) in state.streams.iter().enumerate() {
            let done = self.devices.context(self.stage_devices[i])?.new_event()?;
            s.record(&done)?;
            first.wait(&done)?;
        }
        first.record(&end)?;
        let synced = state.streams.iter().try_for_each(|s| s.synchronize());
        let epoch = self.epoch;
        self.epoch = self.epoch.wrapping_add(1);
        synced?;
        if let Some(e) = state.errors.iter().map(|slot| slot.check()).find_map(|r| r.err()) {
            self.reset()?;
            return Err(e);
        }
        let traces = crate::stream::download_traces(&state.traces)?;
        Ok(MultiStreamRun {
            epoch,
            elapsed_ms: start.elapsed_ms(&end)?,
            wait_kernels: state.wait_kernel.clone(),
            scopes: state.placement.edges().iter().map(|e| e.scope()).collect(),
            traces,
        })
    }

    /// Zeroes every counter, flag, semaphore and error slot and restarts at epoch 0 ([`run`]
    /// does this itself after a launch that reported a timeout).
    ///
    /// [`run`]: MultiStreamGraph::run
    pub fn reset(&mut self) -> Result<()> {
        if let Some(state) = self.state.as_mut() {
            for s in &state.streams {
                s.synchronize()?;
            }
            for b in state
                .counters
                .iter_mut()
                .chain(state.start_counts.iter_mut())
                .chain(state.semaphores.iter_mut())
            {
                b.fill(0)?;
            }
            for e in &mut state.errors {
                e.clear()?;
            }
        }
        self.epoch = 0;
        Ok(())
    }
}
