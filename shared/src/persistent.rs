//! Persistent mode (issue 5): the launch descriptors the megakernel reads and the scheduler's
//! queue polling, written once here so the device kernel and the host tests run the same code.
//!
//! # Descriptors
//!
//! The host uploads one [`PersistentStage`] per stage, in **topological order** (every producer
//! before its consumers), and the stages' outgoing [`PersistentEdge`]s grouped by producer (a
//! stage's edges are `edges[first_edge .. first_edge + num_edges]`). The kernel gets one
//! [`PersistentDesc`] by value. Stage *indices* below are positions in that array; the
//! `stage` field of a descriptor keeps the user's stage id for errors and traces.
//!
//! # Scheduling
//!
//! [`poll_queues`] makes one non-blocking round over the stages' workqueues, **last stage
//! first** (downstream first: finishing consumer tiles drains the pipeline and frees what the
//! next launch needs), with [`try_pop`] on each. A queue whose tickets are all taken is
//! [`Pop::Finished`] and is remembered in a bit mask, so a scheduler stops asking it; when every
//! stage is finished the launch has handed out all its tiles ([`Poll::Done`]): termination is
//! counted (each queue's head ends at exactly `(epoch + 1) * tiles`), not guessed.
//! [`wait_queues`] repeats rounds until a tile or `Done`, bounded by the launch's timeout: past it,
//! it names the most upstream unfinished stage's queue (`tail` word, its value, and `head + 1`,
//! the tail the next pop needs) as a [`ProtocolError::Timeout`].
//!
//! The no-protocol variant of the megakernel (the overhead baseline) takes tickets from one
//! plain counter with `atom.add` instead; [`counter_window`] and [`locate_ticket`] say which
//! ticket is which tile.
//!
//! [`PersistentEdge`]: crate::protocol::PersistentEdge

use crate::gemm::GemmParams;
use crate::layout::{DevAddr, ErrorCode, WorkQueue, WorkQueueCounters};
use crate::protocol::{take_ticket, try_pop, try_slot, LaunchWindow, Pop, Position, ProtocolError, ProtocolMemory};
use crate::tile::Grid;
use bytemuck::{Pod, Zeroable};

/// Most stages one persistent launch runs (the scheduler keeps one bit per stage).
pub const MAX_STAGES: u32 = 32;

/// Threads per block of the path-1 persistent entry points (8 warps; the tile workers need
/// 256). The path-2 megakernels (`persistent_sm90_*`) run blocks of
/// [`WG_THREADS`](crate::gemm_sm90::WG_THREADS) (384).
pub const BLOCK_THREADS: u32 = 256;

/// Tile worker codes ([`PersistentStage::worker`]): what a stage's tiles compute. Each
/// persistent entry point implements a set of them; the host checks the set before launching.
pub mod worker {
    /// `C[m,n] = A[m,k] B[k,n]`, f32, row-major, 32 x 32 tiles, K summed in order (the scalar
    /// GeMM of stream mode; [`GemmParams`](crate::gemm::GemmParams) fields `a`, `b`, `c`, `m`,
    /// `n`, `k`).
    pub const SCALAR_GEMM_F32: u32 = 1;
    /// `C[m,n] = A[m,n] + B[m,n]`, f32, row-major, 32 x 32 tiles (fan-in tests; fields `a`,
    /// `b`, `c`, `m`, `n`).
    pub const SUM_F32: u32 = 2;
    /// The tensor-core GeMM, bf16 inputs, 128 x 128 x 32 tiles (all of
    /// [`GemmParams`](crate::gemm::GemmParams)).
    pub const GEMM_BF16_128X128: u32 = 3;
    /// GeMM path 2 (sm_90a: TMA + `wgmma`), bf16 inputs, row-major A and B, 128 x 256 x 64
    /// tiles: the stage's [`TmaGemmParams`](crate::gemm_sm90::TmaGemmParams) at
    /// [`PersistentStage::tma_params`](super::PersistentStage::tma_params).
    pub const GEMM_SM90_BF16_128X256: u32 = 4;
    /// GeMM path 2, bf16 inputs, row-major A and B, 128 x 128 x 64 tiles.
    pub const GEMM_SM90_BF16_128X128: u32 = 5;
}

/// Margin by which a path-2 megakernel's pipeline waits outlast its queue waits: the consumer
/// warpgroups wait on the shared-memory pipeline while the producer thread waits (bounded by
/// the launch's `timeout_ns`) for a ready tile, so a queue timeout is always reported first.
pub const SM90_PIPELINE_MARGIN_NS: u64 = 2_000_000_000;

/// Bound on a path-2 megakernel's pipeline waits (TMA stages full or empty, a slot of the
/// post ring freed) for a launch whose queue waits are bounded by `queue_timeout_ns`: the
/// host writes it into every stage's `TmaGemmParams::timeout_ns`.
pub const fn sm90_pipeline_timeout_ns(queue_timeout_ns: u64) -> u64 {
    queue_timeout_ns.saturating_add(SM90_PIPELINE_MARGIN_NS)
}

/// Bound on a path-2 megakernel's post warp waiting for the next finished tile: it waits on the
/// consumers, which wait on the pipeline (one margin more).
pub const fn sm90_post_timeout_ns(queue_timeout_ns: u64) -> u64 {
    sm90_pipeline_timeout_ns(queue_timeout_ns).saturating_add(SM90_PIPELINE_MARGIN_NS)
}

/// Slots of a path-2 megakernel's post ring (finished tiles handed from the consumer
/// warpgroups to the post warp through shared memory).
pub const SM90_POST_RING: u32 = 4;

/// Position in a single-producer, single-consumer ring of `mbarrier` pairs (the path-2 post
/// ring): the slot and the parity of the phase the slot is in. Slot `i`'s `full` barrier
/// completes phase `k` when its `k`-th item is published, its `empty` barrier when that item
/// is consumed; a fresh barrier counts its (virtual) phase before 0, parity 1, as complete, so
/// the producer waits on `empty` with parity `phase ^ 1` and the consumer on `full` with
/// `phase`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct RingCursor {
    /// Slot index, `0..depth`.
    pub slot: u32,
    /// Parity of the slot's current phase.
    pub phase: u32,
}

impl RingCursor {
    /// The next position of a ring of `depth` slots (the phase flips on wrap-around).
    pub const fn next(self, depth: u32) -> Self {
        if self.slot + 1 >= depth {
            Self {
                slot: 0,
                phase: self.phase ^ 1,
            }
        } else {
            Self {
                slot: self.slot + 1,
                phase: self.phase,
            }
        }
    }
}

/// [`PersistentDesc::flags`]: the epilogue skips the scoreboard walk (the "no dependencies"
/// benchmark mode: every tile is prefilled, nothing is pushed).
pub const FLAG_SKIP_POST: u32 = 1;
/// [`PersistentDesc::flags`]: some stage has a trace buffer (thread 0 reads `%globaltimer`).
pub const FLAG_TRACE: u32 = 2;
/// [`PersistentDesc::flags`], a benchmark ablation of the path-2 megakernel (dependencies-met
/// launches only, refused otherwise: nothing is posted): the consumers hand no finished tile to
/// the post warp (no consumers' barrier, no push, no post, no tiles-done count). The protocol's
/// per-tile cost in the consumers and the post warp is what the launch gets faster by.
pub const FLAG_ABLATE_NO_POSTS: u32 = 4;
/// [`PersistentDesc::flags`], a benchmark ablation of the path-2 megakernel
/// (dependencies-met launches only): the scheduler takes no tile ahead mid-tile; every pop
/// happens at the tile boundary, as the no-protocol twin's ticket does.
pub const FLAG_ABLATE_NO_PREFETCH: u32 = 8;
/// [`PersistentDesc::flags`], a benchmark ablation of the path-2 megakernel
/// (dependencies-met launches only): the scheduler issues no `fence.proxy.async.global`
/// between a pop and the tile's TMA loads (the order a pipelined launch needs; with every
/// dependency met up front nothing read was written during the launch).
pub const FLAG_ABLATE_NO_FENCE: u32 = 16;
/// A host-side benchmark ablation (never read on the device): the dependencies-met megakernel
/// follows its prefill kernel in plain stream order instead of a programmatic dependent launch.
pub const FLAG_ABLATE_NO_PDL: u32 = 32;
/// Every ablation flag.
pub const FLAGS_ABLATE: u32 =
    FLAG_ABLATE_NO_POSTS | FLAG_ABLATE_NO_PREFETCH | FLAG_ABLATE_NO_FENCE | FLAG_ABLATE_NO_PDL;

/// One stage of a persistent launch, as the device reads it (global memory).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PersistentStage {
    /// The tile worker's operands (every worker so far is GeMM-like; see [`worker`]).
    pub params: GemmParams,
    /// The stage's workqueue.
    pub queue: WorkQueue,
    /// The stage's tile grid (tiles per launch = `grid.count()`).
    pub grid: Grid,
    /// Address of `grid.count()` [`TraceEvent`](crate::layout::TraceEvent)s (by linear tile
    /// id), or 0 when the stage is not traced.
    pub trace: DevAddr,
    /// Address of `ready_count` `u32` tile ids: the queue's prefill, in order, written before
    /// every launch by the prefill kernel.
    pub ready: DevAddr,
    /// Tiles prefilled per launch.
    pub ready_count: u32,
    /// [`worker`] code.
    pub worker: u32,
    /// The user's stage id (errors, traces).
    pub stage: u32,
    /// Index of the stage's first outgoing edge in [`PersistentDesc::edges`].
    pub first_edge: u32,
    /// Number of outgoing edges.
    pub num_edges: u32,
    /// Test-only fault and delay injection for the stage's posts
    /// ([`DEBUG_SKIP_POST`](crate::layout::DEBUG_SKIP_POST): the tile whose linear id is
    /// `debug_param` is never posted; [`DEBUG_DELAY`](crate::layout::DEBUG_DELAY): every tile
    /// waits a pseudo-random 0..`debug_param` ns before its post); 0 in production.
    pub debug_flags: u32,
    /// Parameter of `debug_flags`.
    pub debug_param: u32,
    /// Stage indices (a bit each) of every stage upstream of this one, transitively (its
    /// producers, theirs, ...); 0 for a stage with no producer. The path-2 scheduler pops this
    /// stage's queue with one fetch-add once all of them are finished
    /// ([`poll_queues_committing`]).
    pub upstream: u32,
    /// Path-2 stages (`worker::GEMM_SM90_*`): address of the stage's
    /// [`TmaGemmParams`](crate::gemm_sm90::TmaGemmParams) (its operands as `params`, its two
    /// tensor maps, the launch's error slot, the pipeline timeout
    /// [`sm90_pipeline_timeout_ns`], `split_k` 1). 0 for path-1 stages.
    pub tma_params: DevAddr,
}

/// A persistent launch: passed by value to the megakernel and to the prefill kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PersistentDesc {
    /// Address of `num_stages` [`PersistentStage`]s, in topological order.
    pub stages: DevAddr,
    /// Address of the [`PersistentEdge`](crate::protocol::PersistentEdge)s, grouped by producer.
    pub edges: DevAddr,
    /// Address of the launch's [`ErrorSlot`](crate::layout::ErrorSlot).
    pub error: DevAddr,
    /// Address of the `u32` tiles-done counter (count-up-for-ever: launch `e` ends at
    /// `(e + 1) * total_tiles`).
    pub done: DevAddr,
    /// Address of the `u32` ticket counter of the no-protocol variant ([`counter_window`]).
    pub counter: DevAddr,
    /// Bound on every wait, in nanoseconds.
    pub timeout_ns: u64,
    /// Number of stages (at most [`MAX_STAGES`]).
    pub num_stages: u32,
    /// Launch epoch (0-based).
    pub epoch: u32,
    /// Tiles of all stages per launch.
    pub total_tiles: u32,
    /// [`FLAG_SKIP_POST`], [`FLAG_TRACE`].
    pub flags: u32,
    /// Test-only fault injection: bit `i` set = the prefill kernel leaves stage index `i`'s
    /// queue empty (its tiles are never ready: the launch must time out and report).
    pub withhold_prefill: u32,
    /// The path-2 post warp's suspend-time hint while it waits for a finished tile, in
    /// nanoseconds (`mbarrier.try_wait`'s `suspendTimeHint`), or 0 for the hardware's default
    /// wait: a longer sleep costs the consumer warps of its SM sub-partition fewer issue
    /// slots, and the warp still wakes when the tile arrives.
    pub post_wait_ns: u32,
    /// Address of one [`BlockStamps`] per block of the launch (by linear block index), or 0
    /// when the launch records none (path-2 megakernels record them when tracing).
    pub blocks: DevAddr,
}

/// One block's lifetime in a traced path-2 megakernel launch (`%globaltimer` nanoseconds; 0
/// where the block never got there): what a launch spends outside its tiles, at entry and at
/// exit, which the per-tile [`TraceEvent`](crate::layout::TraceEvent)s do not see.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockStamps {
    /// Thread 0's first instruction.
    pub entry: u64,
    /// The scheduler (the protocol's scheduler warp; the twin's thread 0), before its first
    /// pop: the block's setup done and, launched programmatically behind the prefill, the
    /// prefill's end awaited.
    pub ready: u64,
    /// The consumer warpgroups leave: the block's last tile is stored (and handed to the post
    /// warp).
    pub consumers_done: u64,
    /// The block's last post is done (the post warp leaves); the no-protocol twin, which does
    /// not post, writes `consumers_done` again.
    pub exit: u64,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<PersistentStage>() == 168);
    assert!(offset_of!(PersistentStage, queue) == 72);
    assert!(offset_of!(PersistentStage, grid) == 96);
    assert!(offset_of!(PersistentStage, trace) == 112);
    assert!(offset_of!(PersistentStage, ready) == 120);
    assert!(offset_of!(PersistentStage, ready_count) == 128);
    assert!(offset_of!(PersistentStage, worker) == 132);
    assert!(offset_of!(PersistentStage, stage) == 136);
    assert!(offset_of!(PersistentStage, first_edge) == 140);
    assert!(offset_of!(PersistentStage, num_edges) == 144);
    assert!(offset_of!(PersistentStage, debug_flags) == 148);
    assert!(offset_of!(PersistentStage, debug_param) == 152);
    assert!(offset_of!(PersistentStage, upstream) == 156);
    assert!(offset_of!(PersistentStage, tma_params) == 160);
    assert!(size_of::<PersistentDesc>() == 80);
    assert!(offset_of!(PersistentDesc, blocks) == 72);
    assert!(size_of::<BlockStamps>() == 32);
    assert!(offset_of!(PersistentDesc, timeout_ns) == 40);
    assert!(offset_of!(PersistentDesc, num_stages) == 48);
    assert!(offset_of!(PersistentDesc, epoch) == 52);
    assert!(offset_of!(PersistentDesc, total_tiles) == 56);
    assert!(offset_of!(PersistentDesc, flags) == 60);
    assert!(offset_of!(PersistentDesc, withhold_prefill) == 64);
};

/// The [`ErrorCode`] a device reports for a protocol error (every wait in persistent mode is a
/// queue wait, so a timeout is [`ErrorCode::QueueTimeout`]).
pub const fn error_code(e: &ProtocolError) -> ErrorCode {
    match e {
        ProtocolError::Timeout { .. } => ErrorCode::QueueTimeout,
        ProtocolError::SlotOverwritten { .. } => ErrorCode::SlotOverwritten,
        ProtocolError::StaleCounter { .. } => ErrorCode::StaleCounter,
        ProtocolError::QueueFull { .. } => ErrorCode::QueueFull,
        ProtocolError::TooManyPushes { .. } => ErrorCode::TooManyPushes,
        ProtocolError::ExcessArrival { .. } => ErrorCode::ExcessArrival,
        ProtocolError::OutOfRange { .. } => ErrorCode::OutOfRange,
    }
}

/// A stage's queue as the scheduler polls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageQueue {
    /// The workqueue.
    pub queue: WorkQueue,
    /// Tiles pushed (and popped) per launch: the stage's tile count.
    pub tiles: u32,
    /// Stage indices (a bit each) of every stage upstream of this one: its producers, theirs,
    /// and so on ([`PersistentStage::upstream`]). 0 for a stage with no producer.
    pub upstream: u32,
}

/// What a scheduler round found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// Tile `tile` (linear id) of stage index `stage`, popped: the caller must run and post it.
    Tile {
        /// Stage index (position in the descriptor array).
        stage: u32,
        /// Linear tile id.
        tile: u32,
    },
    /// A ticket of stage index `stage` taken by a committing round ([`poll_queues_committing`])
    /// whose slot is not pushed yet: the caller owns position `position` of the stage's queue
    /// and must run its tile once it is published ([`crate::protocol::try_slot`],
    /// [`crate::protocol::wait_ticket`]).
    Ticket {
        /// Stage index.
        stage: u32,
        /// Position in the stage's launch window.
        position: u32,
    },
    /// Nothing is ready now, but some stage still has tiles to hand out.
    Empty,
    /// Every stage's tiles are handed out: the caller has no more work this launch.
    Done,
}

/// A protocol error and the stage index whose queue it happened on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageError {
    /// Stage index.
    pub stage: u32,
    /// What went wrong.
    pub error: ProtocolError,
}

/// Why [`wait_queues`] returned without work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// `aborted()` said another block failed: stop without reporting.
    Aborted,
    /// A protocol error, or the timeout (a [`ProtocolError::Timeout`] on the most upstream
    /// unfinished stage's queue): report it.
    Failed(StageError),
}

/// The mask with a bit for each of `stages` stages.
const fn all_stages(stages: u32) -> u32 {
    if stages >= MAX_STAGES {
        u32::MAX
    } else {
        (1u32 << stages) - 1
    }
}

/// One non-blocking round over the queues of `stages` stages (at most [`MAX_STAGES`]), last
/// index first; `finished` accumulates the stages whose tickets are all taken (start at 0 for
/// a launch). `queue_of(i)` describes stage index `i`. Never answers [`Poll::Ticket`].
pub fn poll_queues<M: ProtocolMemory + ?Sized>(
    mem: &M,
    stages: u32,
    epoch: u32,
    timeout_ns: u64,
    finished: &mut u32,
    queue_of: impl Fn(u32) -> StageQueue,
) -> Result<Poll, StageError> {
    poll_round::<M, false>(mem, stages, epoch, timeout_ns, finished, queue_of)
}

/// [`poll_queues`], except that a stage whose upstream stages ([`StageQueue::upstream`], at
/// least one) are all finished in `finished` is popped with one fetch-add
/// ([`crate::protocol::take_ticket`]) instead of [`try_pop`]'s CAS loop, pushed or not: the
/// answer is then [`Poll::Tile`] if the ticket's slot is already published, else
/// [`Poll::Ticket`], which commits the caller to that slot.
///
/// Why: when the last producer tiles of a stage run, every block's scheduler turns to its
/// queue at once, while it is still being pushed; the CAS loop then hands out about one
/// ticket per L2 round trip, and the pops queued behind each other stalled the path-2
/// producers mid-tile by 0 to 200 µs at the layer boundary of a 2-layer stack (H100, session
/// 43), which desynchronized the blocks that share B's columns for the rest of the layer
/// (its tiles ran 13% slower than with every queue prefilled).
///
/// Why it cannot deadlock: every producer tile of the stage is taken (its stages are
/// finished), so each is running in some block or committed as a ticket of a stage further
/// upstream, whose producers are taken in turn; a block that runs a tile finishes and posts
/// it without its scheduler, so every such slot is published without the caller's help, as
/// long as the caller never blocks on a ticket while it holds unfinished work of its own. The
/// path-2 scheduler polls this way without blocking (during a tile) and waits for a ticket
/// only between tiles, once the tile before has all its loads issued.
pub fn poll_queues_committing<M: ProtocolMemory + ?Sized>(
    mem: &M,
    stages: u32,
    epoch: u32,
    timeout_ns: u64,
    finished: &mut u32,
    queue_of: impl Fn(u32) -> StageQueue,
) -> Result<Poll, StageError> {
    poll_round::<M, true>(mem, stages, epoch, timeout_ns, finished, queue_of)
}

/// The round of [`poll_queues`] (`COMMITTING` false) and [`poll_queues_committing`].
#[inline(always)]
fn poll_round<M: ProtocolMemory + ?Sized, const COMMITTING: bool>(
    mem: &M,
    stages: u32,
    epoch: u32,
    timeout_ns: u64,
    finished: &mut u32,
    queue_of: impl Fn(u32) -> StageQueue,
) -> Result<Poll, StageError> {
    let stages = if stages > MAX_STAGES { MAX_STAGES } else { stages };
    let mut i = stages;
    while i > 0 {
        i -= 1;
        if *finished & (1 << i) != 0 {
            continue;
        }
        let q = queue_of(i);
        let window = LaunchWindow::new(epoch, q.tiles);
        if COMMITTING && q.upstream != 0 && q.upstream & !*finished == 0 {
            let err = |error| StageError { stage: i, error };
            match take_ticket(mem, &q.queue, window).map_err(err)? {
                Some(position) => {
                    return Ok(match try_slot(mem, &q.queue, window, position).map_err(err)? {
                        Some(tile) => Poll::Tile { stage: i, tile },
                        None => Poll::Ticket { stage: i, position },
                    })
                }
                None => *finished |= 1 << i,
            }
            continue;
        }
        match try_pop(mem, &q.queue, window, timeout_ns) {
            Ok(Pop::Tile(tile)) => return Ok(Poll::Tile { stage: i, tile }),
            Ok(Pop::Empty) => {}
            Ok(Pop::Finished) => *finished |= 1 << i,
            Err(error) => return Err(StageError { stage: i, error }),
        }
    }
    if *finished == all_stages(stages) {
        Ok(Poll::Done)
    } else {
        Ok(Poll::Empty)
    }
}

const HEAD: u64 = core::mem::offset_of!(WorkQueueCounters, head) as u64;
const TAIL: u64 = core::mem::offset_of!(WorkQueueCounters, tail) as u64;

/// Rounds of [`poll_queues`] until a tile or [`Poll::Done`] (never [`Poll::Empty`]). Between
/// rounds it asks `aborted()` (another block reported an error: stop) and backs off
/// ([`ProtocolMemory::backoff`]); once more than `timeout_ns` passed since the first empty
/// round, it fails with a [`ProtocolError::Timeout`] naming the most upstream unfinished
/// stage: `addr` = its queue's `tail`, `seen` = the tail, `expected` = `head + 1`.
pub fn wait_queues<M: ProtocolMemory + ?Sized>(
    mem: &M,
    stages: u32,
    epoch: u32,
    timeout_ns: u64,
    finished: &mut u32,
    queue_of: impl Fn(u32) -> StageQueue,
    mut aborted: impl FnMut() -> bool,
) -> Result<Poll, WaitError> {
    let mut start = None;
    let mut round = 0u32;
    loop {
        match poll_queues(mem, stages, epoch, timeout_ns, finished, &queue_of) {
            Ok(Poll::Empty) => {}
            Ok(done_or_tile) => return Ok(done_or_tile),
            Err(e) => return Err(WaitError::Failed(e)),
        }
        if aborted() {
            return Err(WaitError::Aborted);
        }
        let now = mem.now_ns();
        let began = *start.get_or_insert(now);
        if now.wrapping_sub(began) > timeout_ns {
            // Empty means some stage is unfinished; the lowest index is the most upstream.
            let stage = (!*finished).trailing_zeros().min(stages.saturating_sub(1));
            let q = queue_of(stage).queue;
            let tail = q.counters.wrapping_add(TAIL);
            let seen = mem.load_relaxed(tail);
            let head = mem.load_relaxed(q.counters.wrapping_add(HEAD));
            return Err(WaitError::Failed(StageError {
                stage,
                error: ProtocolError::Timeout {
                    addr: tail,
                    seen,
                    expected: head.wrapping_add(1),
                },
            }));
        }
        mem.backoff(round);
        round = round.saturating_add(1);
    }
}

/// The no-protocol variant's ticket window of launch `epoch`: `total` tiles per launch, and
/// every one of the launch's `ctas` blocks takes exactly one ticket past them (the one that
/// tells it to stop), so launch `e` starts at `e * (total + ctas)` and nothing is cleared.
pub const fn counter_window(epoch: u32, total: u32, ctas: u32) -> LaunchWindow {
    LaunchWindow {
        start: epoch.wrapping_mul(total.wrapping_add(ctas)),
        len: total,
    }
}

/// Ticket `n` (`< total`) of the no-protocol variant as `(stage index, n-th tile of the
/// stage)`: stages last index first (as the queue scheduler prefers them); [`twin_tile`] maps
/// the second to the stage's tile id. `count(i)` is stage index `i`'s tile count. `None` past the last stage.
pub fn locate_ticket(n: u32, stages: u32, count: impl Fn(u32) -> u32) -> Option<(u32, u32)> {
    let mut rest = n;
    let mut i = if stages > MAX_STAGES { MAX_STAGES } else { stages };
    while i > 0 {
        i -= 1;
        let c = count(i);
        if rest < c {
            return Some((i, rest));
        }
        rest -= c;
    }
    None
}

/// The linear tile id ([`Grid::linear`]) of the `n`-th tile the no-protocol variant takes in a
/// stage of grid `grid`: the plain GeMM kernel's grouped raster order
/// ([`crate::gemm_sm90::raster_tile`] with [`crate::gemm_sm90::WG_RASTER_GROUP`]), so the twin
/// walks L2 as the plain kernel does and is a fair protocol-off baseline; grids with split-K
/// slices (`z > 1`) keep the linear order.
pub const fn twin_tile(n: u32, grid: Grid) -> u32 {
    if grid.z != 1 || n >= grid.count() {
        return n;
    }
    let (tm, tn) = crate::gemm_sm90::raster_tile(n, grid.x, grid.y, crate::gemm_sm90::WG_RASTER_GROUP);
    tm * grid.y + tn
}

/// The no-protocol variant's work for a ticket taken from its counter in `window`:
/// `Some((stage index, tile))`, or `None` when the launch's tiles are all handed out (a
/// counter behind the window, left by an aborted launch, also stops: the host checks the
/// counter after the launch).
pub fn counter_ticket(
    ticket: u32,
    window: LaunchWindow,
    stages: u32,
    count: impl Fn(u32) -> u32,
) -> Option<(u32, u32)> {
    match window.position(ticket) {
        Position::Within(n) => locate_ticket(n, stages, count),
        Position::Behind | Position::Done => None,
    }
}

#[cfg(all(test, target_has_atomic = "64"))]
mod tests;
