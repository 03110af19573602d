//! [`PersistentGraph`]: a planned persistent-mode graph on one device: its protocol state
//! uploaded once, launched again and again without re-allocation (epochs count up), checked
//! after every synchronized launch, and reset after an error.

use std::marker::PhantomData;
use std::mem::offset_of;

use cudarc::driver::LaunchConfig;
use cusync_shared::gemm_sm90::TmaGemmParams;
use cusync_shared::layout::{TraceEvent, WorkQueueCounters, DEBUG_DELAY, DEBUG_SKIP_POST};
use cusync_shared::persistent::{
    sm90_pipeline_timeout_ns, BlockStamps, PersistentDesc, PersistentStage, BLOCK_THREADS, FLAGS_ABLATE,
    FLAG_ABLATE_NO_PDL, FLAG_ABLATE_NO_POSTS, FLAG_SKIP_POST, FLAG_TRACE,
};
use cusync_shared::protocol::PersistentEdge;

use super::knobs::{ablation_from_env, post_wait_from_env, takes_ablations, MAX_POST_WAIT_NS};
use super::spec::{
    device_order, full_order, resident_ctas, total_tiles, upstream_masks, PersistentOptions, PersistentSpec,
};
use super::work::{Family, StageWork};
use crate::kernels::PTX_ARCH;
use crate::ops::gemm::InputType;
use crate::ops::gemm_sm90::{device_supports, encode_maps, WgTile};
use crate::plan::{Plan, ProtocolImage, StageId};
use crate::runtime::{
    kernel_arg, launch_ordered, programmatic_supported, Context, DeviceBuffer, ErrorSlotBuffer, Stream, StreamOrder,
};
use crate::stream::DebugInjection;
use crate::{Error, Result};

/// The outcome of one synchronized launch.
#[derive(Clone, Debug)]
pub struct PersistentRun {
    /// The epoch that ran.
    pub epoch: u32,
    /// Device time of the launch (prefill and megakernel), in ms (CUDA events).
    pub elapsed_ms: f32,
    /// Blocks launched.
    pub ctas: u32,
    /// Per stage (by [`StageId`]), its tiles' trace events by linear tile id (empty unless
    /// tracing).
    pub traces: Vec<Vec<TraceEvent>>,
    /// Per block (by linear block index), its lifetime stamps: path-2 families when tracing,
    /// else empty ([`BlockSummary`](super::BlockSummary) reads them).
    pub blocks: Vec<BlockStamps>,
}

/// Device memory of a graph: protocol state, descriptors, counters.
struct DeviceState {
    image: ProtocolImage,
    image_buf: DeviceBuffer<u32>,
    /// The stage descriptors as uploaded (device order), rewritten by `set_debug`.
    descs: Vec<PersistentStage>,
    stages: DeviceBuffer<u32>,
    _edges: DeviceBuffer<u32>,
    _ready: DeviceBuffer<u32>,
    traces: Vec<Option<DeviceBuffer<u8>>>,
    /// One [`BlockStamps`] per block (path-2 families, when tracing), zeroed before each
    /// traced launch.
    blocks: Option<DeviceBuffer<u8>>,
    error: ErrorSlotBuffer,
    done: DeviceBuffer<u32>,
    counter: DeviceBuffer<u32>,
    /// Path-2 families: every stage's tensor maps and `TmaGemmParams`.
    _tma: Option<TmaBuffers>,
}

/// A path-2 graph's every stage's two tensor maps (32 words each) and its `TmaGemmParams`
/// (device order), which `PersistentStage::tma_params` points into.
struct TmaBuffers {
    _maps: DeviceBuffer<u64>,
    _params: DeviceBuffer<u32>,
}

/// The path-2 per-stage parameters of `work` (device order): tensor maps encoded for `tile`
/// and uploaded, then one `TmaGemmParams` per stage with the launch's error slot, the pipeline
/// timeout for queue waits of `timeout_ns`, and no split-K. Returns the buffers and each
/// stage's `TmaGemmParams` address.
fn upload_tma_params(
    cx: &Context,
    work: &[StageWork<'_>],
    tile: WgTile,
    error: u64,
    timeout_ns: u64,
) -> Result<(TmaBuffers, Vec<u64>)> {
    let mut maps = Vec::with_capacity(32 * work.len());
    for w in work {
        maps.extend_from_slice(&encode_maps(&w.params(), tile, InputType::Bf16)?);
    }
    // Each stage's maps at 256 bytes apart from a 256-byte aligned allocation: 64-byte aligned.
    let maps_buf = cx.upload(&maps)?;
    let params: Vec<TmaGemmParams> = work
        .iter()
        .enumerate()
        .map(|(i, w)| TmaGemmParams {
            gemm: w.params(),
            tensor_maps: maps_buf.addr_of(32 * i),
            error,
            timeout_ns: sm90_pipeline_timeout_ns(timeout_ns),
            raster_group: 1,
            split_k: 1,
            split_workspace: 0,
            split_counters: 0,
            sk_dp_tiles: 0,
            sk_units: 0,
            pipeline_depth: 0,
            _pad: 0,
        })
        .collect();
    let params_buf = cx.upload(bytemuck::cast_slice::<TmaGemmParams, u32>(&params))?;
    const WORDS: usize = std::mem::size_of::<TmaGemmParams>() / 4;
    let addrs = (0..work.len()).map(|i| params_buf.addr_of(WORDS * i)).collect();
    Ok((
        TmaBuffers {
            _maps: maps_buf,
            _params: params_buf,
        },
        addrs,
    ))
}

/// A persistent-mode graph on one device: one launch of co-resident blocks (256 threads; 384
/// for the path-2 megakernel, [`Family::threads`]) runs every stage; tiles are popped from
/// per-stage workqueues when ready and posted through the planner's dependency arrays to their
/// consumers' scoreboards (device/src/persistent).
///
/// Launches go to the graph's own stream and never overlap (the protocol's rule 3). Each
/// launch is the prefill kernel (this epoch's queue prefill, on the device) then the
/// megakernel; nothing is cleared in between. On an sm_90 device (the sm_90a build) the
/// megakernel is launched programmatically behind the prefill: its blocks start while the
/// prefill runs, and its scheduler and posting threads wait for the prefill's end
/// (`griddepcontrol.wait`) before touching a queue. After a synchronized launch the graph checks the
/// error slot and the tiles-done counter; after an error it rewrites its protocol state and
/// restarts at epoch 0, so the next launch is right.
pub struct PersistentGraph<'cx, 'b> {
    cx: &'cx Context,
    plan: Plan,
    family: Family,
    options: PersistentOptions,
    timeout_ns: u64,
    /// Device stage index -> stage id ([`device_order`]).
    topo: Vec<StageId>,
    /// Stage id -> device stage index.
    index: Vec<u32>,
    ctas: u32,
    total: u32,
    prefill_blocks: u32,
    /// How the megakernel follows the prefill on the stream: programmatic where supported.
    megakernel_order: StreamOrder,
    stream: Stream,
    state: DeviceState,
    /// Benchmark ablation flags of dependencies-met launches
    /// ([`ABLATE_ENV`](super::ABLATE_ENV)), else 0.
    ablate: u32,
    /// The post warp's suspend-time hint ([`PersistentDesc::post_wait_ns`]).
    post_wait_ns: u32,
    /// Launches since the last reset that posted no tile (ablated with `FLAG_ABLATE_NO_POSTS`):
    /// the tiles-done counter, which counts up for ever, did not move for them.
    unposted: u32,
    epoch: u32,
    counter_epoch: u32,
    withhold: u32,
    _buffers: PhantomData<&'b ()>,
}

/// The consumer tile of a stage that stopped short: scoreboards count up for ever (launch `e`
/// completes tile `i` at `(e + 1) * needed[i]`), so a launch that stalled leaves its starved
/// tiles with the fewest completed launches `counters[i] / needed[i]`; the first such tile
/// (tiles that need nothing are never starved by a scoreboard). `None` when the stage has no
/// scoreboard targets.
pub fn starved_tile(needed: &[u32], counters: &[u32]) -> Option<u32> {
    needed
        .iter()
        .zip(counters)
        .enumerate()
        .filter(|(_, (&need, _))| need > 0)
        .min_by_key(|&(i, (&need, &count))| (count / need, i))
        .map(|(i, _)| i as u32)
}

fn upload_words(cx: &Context, words: &[u32]) -> Result<DeviceBuffer<u32>> {
    if words.is_empty() {
        cx.alloc_zeros(1)
    } else {
        cx.upload(words)
    }
}

impl<'cx, 'b> PersistentGraph<'cx, 'b> {
    /// Plans `spec` (dependency arrays, scoreboard targets, prefills, cycle detection),
    /// checks it against `cx`'s device (one worker family, shared memory, occupancy: a plan
    /// whose blocks could not be resident is refused), and uploads its protocol state.
    pub fn new(cx: &'cx Context, spec: &PersistentSpec<'b>, options: PersistentOptions) -> Result<Self> {
        let family = spec.check(cx.info().ordinal)?;
        if family.wg_tile().is_some() && !device_supports(cx) {
            return Err(Error::UnsupportedArch {
                device: cx.info().name.clone(),
                major: cx.info().major,
                minor: cx.info().minor,
                ptx_arch: PTX_ARCH,
                hint: "the path-2 persistent megakernel (TMA + wgmma) needs an sm_90 device and the sm_90a \
                       build; build the graph's stages with `StageWork::gemm_bf16` (path 1) instead",
            });
        }
        let plan = spec.plan_spec().plan()?;
        let grids: Vec<_> = plan.stages.iter().map(|s| s.grid).collect();
        let total = total_tiles(&grids)?;
        let smem = family.smem_bytes();
        let mut per_sm = u32::MAX;
        for kernel in [family.kernel(), family.noprotocol_kernel()] {
            if smem > 0 {
                cx.set_max_dynamic_smem(kernel, smem)?;
            }
            per_sm = per_sm.min(cx.occupancy(kernel, family.threads(), smem)?);
        }
        let ctas = resident_ctas(
            family.kernel(),
            smem,
            per_sm,
            cx.info().sm_count,
            options.max_ctas,
            total,
        )?;
        let topo = device_order(&plan.topo_order, options.priority);
        let mut index = vec![0u32; topo.len()];
        for (i, s) in topo.iter().enumerate() {
            index[s.0] = i as u32;
        }
        let timeout_ns = options.timeout.as_nanos().min(u64::MAX as u128) as u64;
        let ablate = if takes_ablations(&options, family) {
            ablation_from_env()?
        } else {
            0
        };

        // Protocol state: one allocation, laid out at its own address.
        let words = ProtocolImage::new(&plan, 0).words.len();
        let mut image_buf = cx.alloc_zeros::<u32>(words)?;
        let image = ProtocolImage::new(&plan, image_buf.addr());
        image_buf.upload(&image.words)?;

        // Prefill lists, in device order.
        let mut ready = Vec::new();
        let mut ready_at = Vec::with_capacity(topo.len());
        for s in &topo {
            let list = if options.no_dependencies {
                full_order(plan.stages[s.0].grid, &spec.plan_spec().stages[s.0].order)
            } else {
                plan.stages[s.0].initial_ready.clone()
            };
            ready_at.push((ready.len(), list.len() as u32));
            ready.extend(list);
        }
        let ready_buf = upload_words(cx, &ready)?;
        let most_ready = ready_at.iter().map(|&(_, n)| n).max().unwrap_or(0);
        let prefill_blocks = most_ready.div_ceil(BLOCK_THREADS).clamp(1, 1024);

        let mut traces = Vec::with_capacity(plan.stages.len());
        for s in &plan.stages {
            traces.push(if options.trace {
                Some(cx.alloc_zeros::<u8>(s.tiles() as usize * std::mem::size_of::<TraceEvent>())?)
            } else {
                None
            });
        }

        let blocks = if options.trace && family.wg_tile().is_some() {
            Some(cx.alloc_zeros::<u8>(ctas as usize * std::mem::size_of::<BlockStamps>())?)
        } else {
            None
        };

        // Path 2: every stage's tensor maps and `TmaGemmParams`, in device order.
        let error = ErrorSlotBuffer::new(cx)?;
        let (tma, tma_params) = match family.wg_tile() {
            Some(tile) => {
                let work: Vec<_> = topo.iter().map(|s| spec.work()[s.0]).collect();
                let (bufs, addrs) = upload_tma_params(cx, &work, tile, error.addr(), timeout_ns)?;
                (Some(bufs), addrs)
            }
            None => (None, vec![0; topo.len()]),
        };

        // Edges grouped by producer, in device order; then the stage descriptors.
        let upstream = upstream_masks(&plan, &topo);
        let mut edges: Vec<PersistentEdge> = Vec::new();
        let mut descs = Vec::with_capacity(topo.len());
        for (i, s) in topo.iter().enumerate() {
            let first_edge = edges.len() as u32;
            edges.extend(plan.stages[s.0].outgoing.iter().map(|&e| image.edges[e]));
            let work = spec.work()[s.0];
            let (at, count) = ready_at[i];
            descs.push(PersistentStage {
                params: work.params(),
                queue: image.stages[s.0].queue,
                grid: plan.stages[s.0].grid,
                trace: traces[s.0].as_ref().map_or(0, |b| b.addr()),
                ready: ready_buf.addr_of(at),
                ready_count: count,
                worker: work.kind().code(),
                stage: s.0 as u32,
                first_edge,
                num_edges: edges.len() as u32 - first_edge,
                debug_flags: 0,
                debug_param: 0,
                upstream: upstream[i],
                tma_params: tma_params[i],
            });
        }
        let edge_buf = upload_words(cx, bytemuck::cast_slice(&edges))?;
        let stage_buf = upload_words(cx, bytemuck::cast_slice(&descs))?;
        let state = DeviceState {
            image,
            image_buf,
            descs,
            stages: stage_buf,
            _edges: edge_buf,
            _ready: ready_buf,
            traces,
            blocks,
            error,
            done: cx.alloc_zeros(1)?,
            counter: cx.alloc_zeros(1)?,
            _tma: tma,
        };
        Ok(Self {
            cx,
            plan,
            family,
            options,
            timeout_ns,
            topo,
            index,
            ctas,
            total,
            prefill_blocks,
            megakernel_order: if programmatic_supported(cx.info(), PTX_ARCH).is_ok() {
                StreamOrder::Programmatic
            } else {
                StreamOrder::AfterPrevious
            },
            stream: cx.new_stream()?,
            state,
            ablate,
            post_wait_ns: post_wait_from_env()?,
            unposted: 0,
            epoch: 0,
            counter_epoch: 0,
            withhold: 0,
            _buffers: PhantomData,
        })
    }

    /// The launch descriptor of epoch `epoch`.
    fn desc(&self, epoch: u32) -> PersistentDesc {
        let s = &self.state;
        let mut flags = 0;
        if self.options.no_dependencies {
            flags |= FLAG_SKIP_POST;
        }
        if self.options.trace {
            flags |= FLAG_TRACE;
        }
        flags |= self.ablate;
        PersistentDesc {
            stages: s.stages.addr(),
            edges: s._edges.addr(),
            error: s.error.addr(),
            done: s.done.addr(),
            counter: s.counter.addr(),
            timeout_ns: self.timeout_ns,
            num_stages: self.topo.len() as u32,
            epoch,
            total_tiles: self.total,
            flags,
            withhold_prefill: self.withhold,
            blocks: s.blocks.as_ref().map_or(0, |b| b.addr()),
            post_wait_ns: self.post_wait_ns,
        }
    }

    fn launch_kernel(
        &self,
        name: &str,
        blocks: u32,
        (threads, smem): (u32, u32),
        desc: PersistentDesc,
        order: StreamOrder,
    ) -> Result<()> {
        let f = self.cx.function(name)?;
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem,
        };
        // SAFETY: every persistent entry point takes one PersistentDesc (`repr(C)`) by value,
        // and `desc` lives through the call; the descriptor's addresses are this graph's allocations and
        // the stages' operands, which the `'b` borrow keeps alive; launches on the graph's one
        // stream never overlap (a programmatic megakernel waits for its prefill's end before
        // it reads a queue, and the prefill starts after the previous megakernel's end).
        unsafe { launch_ordered(&self.stream, &f, config, &mut [kernel_arg(&desc)], order) }
    }

    /// Queues the next epoch's launch (prefill kernel, then the megakernel) on the graph's
    /// stream, without waiting. Synchronize with [`PersistentGraph::finish`] (or use
    /// [`PersistentGraph::run`]); errors of queued launches surface there.
    pub fn launch(&mut self) -> Result<()> {
        let desc = self.desc(self.epoch);
        let prefill = (BLOCK_THREADS, 0);
        self.launch_kernel(
            "persistent_prefill",
            self.prefill_blocks,
            prefill,
            desc,
            StreamOrder::AfterPrevious,
        )?;
        let f = self.family;
        let megakernel = (f.threads(), f.smem_bytes());
        let order = if self.ablate & FLAG_ABLATE_NO_PDL != 0 {
            StreamOrder::AfterPrevious
        } else {
            self.megakernel_order
        };
        self.launch_kernel(f.kernel(), self.ctas, megakernel, desc, order)?;
        if self.ablate & FLAG_ABLATE_NO_POSTS != 0 {
            self.unposted = self.unposted.wrapping_add(1);
        }
        self.epoch = self.epoch.wrapping_add(1);
        Ok(())
    }

    /// Queues one launch of the no-protocol twin (the overhead baseline: tiles from one
    /// counter, no queues, no posts; it ignores dependencies, so outputs of stages that read
    /// other stages are not meaningful).
    pub fn launch_noprotocol(&mut self) -> Result<()> {
        let desc = self.desc(self.counter_epoch);
        let f = self.family;
        let twin = (f.threads(), f.smem_bytes());
        self.launch_kernel(f.noprotocol_kernel(), self.ctas, twin, desc, StreamOrder::AfterPrevious)?;
        self.counter_epoch = self.counter_epoch.wrapping_add(1);
        Ok(())
    }

    /// Waits for every queued launch, then checks them: the error slot (a device report is
    /// returned as [`Error::SyncTimeout`] or [`Error::ProtocolViolation`]), the tiles-done
    /// counter (`epochs * total_tiles`) and the no-protocol counter. On any error the protocol
    /// state is reset (epoch 0) before returning it.
    pub fn finish(&mut self) -> Result<()> {
        self.stream.synchronize()?;
        let checked = self.check_counters();
        if checked.is_err() {
            self.reset()?;
        }
        checked
    }

    fn check_counters(&self) -> Result<()> {
        self.state.error.check().map_err(|e| self.name_starved_tile(e))?;
        let violation = |what, address, seen, expected| Error::ProtocolViolation {
            what,
            stage: u32::MAX,
            tile: u32::MAX,
            cta: u32::MAX,
            sm: u32::MAX,
            address,
            seen,
            expected,
        };
        let done = self.state.done.download()?[0];
        let want = tiles_done_expected(self.epoch, self.unposted, self.total);
        if done != want {
            return Err(violation(
                "tiles-done counter short after the launch",
                self.state.done.addr(),
                done,
                want,
            ));
        }
        let tickets = self.state.counter.download()?[0];
        let want = self.counter_epoch.wrapping_mul(self.total.wrapping_add(self.ctas));
        if tickets != want {
            return Err(violation(
                "no-protocol ticket counter off after the launch",
                self.state.counter.addr(),
                tickets,
                want,
            ));
        }
        Ok(())
    }

    /// A workqueue timeout names the starved stage's queue but no tile (the waiting scheduler
    /// cannot know which tile it waits for): name the stage's first tile that never became
    /// ready, read from its scoreboard (the tile whose counter completed the fewest launches;
    /// [`starved_tile`]). Other errors pass unchanged.
    fn name_starved_tile(&self, e: Error) -> Error {
        match e {
            Error::SyncTimeout {
                stage,
                tile: u32::MAX,
                cta,
                sm,
                what: "workqueue",
                address,
                seen,
                expected,
            } => {
                let named = self.plan.stages.get(stage as usize).and_then(|s| {
                    let sb = self.state.image.stages.get(stage as usize)?.scoreboard;
                    let words = self.state.image_buf.download().ok()?;
                    let at = usize::try_from(sb.counters.checked_sub(self.state.image.base)? / 4).ok()?;
                    starved_tile(&s.needed, words.get(at..at + s.needed.len())?)
                });
                Error::SyncTimeout {
                    stage,
                    tile: named.unwrap_or(u32::MAX),
                    cta,
                    sm,
                    what: "workqueue",
                    address,
                    seen,
                    expected,
                }
            }
            other => other,
        }
    }

    /// One synchronized launch ([`PersistentGraph::launch`] + [`PersistentGraph::finish`]),
    /// timed with CUDA events, with the traces when tracing.
    pub fn run(&mut self) -> Result<PersistentRun> {
        let epoch = self.epoch;
        self.timed(|g| g.launch(), epoch)
    }

    /// One synchronized launch of the no-protocol twin ([`PersistentGraph::launch_noprotocol`]).
    pub fn run_noprotocol(&mut self) -> Result<PersistentRun> {
        let epoch = self.counter_epoch;
        self.timed(|g| g.launch_noprotocol(), epoch)
    }

    fn timed(&mut self, launch: impl FnOnce(&mut Self) -> Result<()>, epoch: u32) -> Result<PersistentRun> {
        let (start, end) = (self.cx.new_event()?, self.cx.new_event()?);
        if let Some(b) = self.state.blocks.as_mut() {
            // A block that never reaches a stamp leaves it 0, not the last launch's value.
            self.stream.synchronize()?;
            b.fill(0)?;
        }
        self.stream.record(&start)?;
        let launched = launch(self);
        self.stream.record(&end)?;
        let finished = self.finish();
        launched?;
        finished?;
        Ok(PersistentRun {
            epoch,
            elapsed_ms: start.elapsed_ms(&end)?,
            ctas: self.ctas,
            traces: self.traces()?,
            blocks: self.block_stamps()?,
        })
    }

    /// Per block, the lifetime stamps of the last traced launch (empty unless tracing a path-2
    /// family).
    pub fn block_stamps(&self) -> Result<Vec<BlockStamps>> {
        self.state
            .blocks
            .as_ref()
            .map_or_else(|| Ok(Vec::new()), DeviceBuffer::download_records)
    }

    /// Rewrites the protocol state (queues, scoreboards, dependency arrays, targets), zeroes
    /// the counters and the error slot, and restarts at epoch 0. [`PersistentGraph::finish`]
    /// does this itself after an error.
    pub fn reset(&mut self) -> Result<()> {
        self.stream.synchronize()?;
        let s = &mut self.state;
        s.image_buf.upload(&s.image.words)?;
        s.done.fill(0)?;
        s.counter.fill(0)?;
        s.error.clear()?;
        self.epoch = 0;
        self.unposted = 0;
        self.counter_epoch = 0;
        Ok(())
    }

    /// Per stage (by [`StageId`]), the trace events of the last launch (empty unless tracing).
    pub fn traces(&self) -> Result<Vec<Vec<TraceEvent>>> {
        crate::stream::download_traces(&self.state.traces)
    }

    /// Benchmark ablations of a dependencies-met path-2 graph (`FLAG_ABLATE_*` of
    /// `cusync_shared::persistent`, or 0 for none; also read from [`ABLATE_ENV`](super::ABLATE_ENV) when
    /// the graph is built): the protocol's per-tile parts taken out one at a time, to measure each.
    /// Refused for any other graph, whose consumers would starve without posts.
    pub fn set_ablation(&mut self, flags: u32) -> Result<()> {
        if flags & !FLAGS_ABLATE != 0 {
            return Err(Error::InvalidArgument(format!("unknown ablation flags {flags:#x}")));
        }
        if flags != 0 && !takes_ablations(&self.options, self.family) {
            return Err(Error::InvalidArgument(
                "ablations apply to dependencies-met path-2 graphs only (others would starve without posts)".into(),
            ));
        }
        self.ablate = flags;
        Ok(())
    }

    /// The path-2 post warp's suspend-time hint while it waits for finished tiles, in
    /// nanoseconds (0: the hardware's default `try_wait` limit; also read from
    /// [`POST_WAIT_ENV`](super::POST_WAIT_ENV) when the graph is built). Any value is correct
    /// (the warp wakes when a tile arrives); it changes only how many issue slots the waiting
    /// warp takes from the consumers. Path-1 graphs have no post warp and ignore it.
    pub fn set_post_wait_ns(&mut self, ns: u32) -> Result<()> {
        if ns > MAX_POST_WAIT_NS {
            return Err(Error::InvalidArgument(format!(
                "post-wait hint {ns} ns: at most {MAX_POST_WAIT_NS} ns"
            )));
        }
        self.post_wait_ns = ns;
        Ok(())
    }

    /// Test-only fault injection: the prefill kernel leaves `stage`'s queue empty (its tiles
    /// never become ready, so launches must time out and report), or `None` for none.
    pub fn set_withheld_prefill(&mut self, stage: Option<StageId>) -> Result<()> {
        self.withhold = match stage {
            None => 0,
            Some(s) => {
                let i = self.index.get(s.0).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "stage {} is not in the graph ({} stages)",
                        s.0,
                        self.index.len()
                    ))
                })?;
                1 << i
            }
        };
        Ok(())
    }

    /// Test-only fault and delay injection into `stage`'s posts (`layout::DEBUG_*`, read by
    /// the megakernel's post): [`DebugInjection::SkipPost`] never posts that tile (its
    /// consumers' tiles never become ready: the launch must time out and report),
    /// [`DebugInjection::RandomDelay`] waits a pseudo-random 0..ns before every post (stress
    /// tests). Rewrites the stage descriptors after the queued launches finished.
    pub fn set_debug(&mut self, stage: StageId, injection: DebugInjection) -> Result<()> {
        let i = *self.index.get(stage.0).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "stage {} is not in the graph ({} stages)",
                stage.0,
                self.index.len()
            ))
        })? as usize;
        let (flags, param) = match injection {
            DebugInjection::None => (0, 0),
            DebugInjection::SkipPost(tile) => {
                let tiles = self.plan.stages[stage.0].tiles();
                if tile >= tiles {
                    return Err(Error::InvalidArgument(format!(
                        "stage {} has {tiles} tiles; tile {tile} cannot skip its post",
                        stage.0
                    )));
                }
                (DEBUG_SKIP_POST, tile)
            }
            DebugInjection::RandomDelay(ns) => (DEBUG_DELAY, ns),
        };
        let d = &mut self.state.descs[i];
        if (d.debug_flags, d.debug_param) == (flags, param) {
            return Ok(());
        }
        d.debug_flags = flags;
        d.debug_param = param;
        self.stream.synchronize()?;
        let words: &[u32] = bytemuck::cast_slice(&self.state.descs);
        self.state.stages.upload(words)
    }

    /// Blocks per launch (co-resident: occupancy x SMs, capped by the options and the tiles).
    pub fn ctas(&self) -> u32 {
        self.ctas
    }

    /// Tiles of all stages per launch.
    pub fn total_tiles(&self) -> u32 {
        self.total
    }

    /// The worker family (and so the entry points) of the graph.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The epoch the next [`PersistentGraph::launch`] uses.
    pub fn next_epoch(&self) -> u32 {
        self.epoch
    }

    /// The plan (dependency arrays, scoreboard targets, prefills, topological order).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The context the graph runs on.
    pub fn context(&self) -> &'cx Context {
        self.cx
    }

    /// The stream the graph launches on (record events on it to time launches).
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Device address of `stage`'s queue `tail` (what a queue timeout names).
    pub fn queue_tail_addr(&self, stage: StageId) -> Option<u64> {
        self.state
            .image
            .stages
            .get(stage.0)
            .map(|m| m.queue.counters + offset_of!(WorkQueueCounters, tail) as u64)
    }

    /// The tiles-done counter (`launches since the last reset * total_tiles` after a
    /// successful launch).
    pub fn done_count(&self) -> Result<u32> {
        self.stream.synchronize()?;
        Ok(self.state.done.download()?[0])
    }

    /// The protocol state's words as the device holds them now (tests).
    pub fn protocol_words(&self) -> Result<Vec<u32>> {
        self.stream.synchronize()?;
        self.state.image_buf.download()
    }

    /// The protocol image (addresses of every queue, scoreboard and array; initial words).
    pub fn image(&self) -> &ProtocolImage {
        &self.state.image
    }
}

/// The tiles-done counter after `launches` launches since the last reset, `unposted` of them
/// ablated without posts (which count nothing), of `total` tiles each (modulo 2^32: it counts
/// up for ever).
pub(crate) fn tiles_done_expected(launches: u32, unposted: u32, total: u32) -> u32 {
    launches.wrapping_sub(unposted).wrapping_mul(total)
}
