//! The hooks a tile kernel calls on its stage, so one kernel body serves every mode:
//! unsynchronized (StreamSync baseline: [`NoHooks`], compiled out), stream mode (tile from the
//! stage's order through an atomic counter, waits on the policy's semaphores, posts after the
//! store) and persistent mode (tiles from a workqueue, posts through scoreboards).
//!
//! Every method is called by *all* threads of the block, in the same order; implementations do
//! the one-thread-then-`bar.sync` dance themselves.

use cusync_shared::gemm_sm90::TmaGemmParams;
use cusync_shared::{Grid, TileIdx};

/// What a tile kernel asks of its stage.
pub trait StageHooks {
    /// The next tile this block computes, or `None` when it has no more work.
    ///
    /// # Safety
    /// Called by every thread of the block.
    unsafe fn next_tile(&mut self, grid: Grid) -> Option<TileIdx>;

    /// Called before the loads of K-step `k_step` (in units of the kernel's K tile) of the
    /// *dependent* operand of `tile`. Returns `false` if the wait timed out (it was reported):
    /// the kernel must then stop working on the tile and return.
    ///
    /// # Safety
    /// Called by every thread of the block.
    unsafe fn wait_dependent(&mut self, tile: TileIdx, k_step: u32) -> bool;

    /// Called after every thread's stores of `tile` were issued.
    ///
    /// # Safety
    /// Called by every thread of the block.
    unsafe fn post(&mut self, tile: TileIdx);
}

/// No synchronization: each block computes the tile of its `blockIdx` once, never waits, never
/// posts. The unsynchronized kernels use it, so they are the same code with the hooks compiled out.
pub struct NoHooks {
    taken: bool,
}

impl NoHooks {
    /// Hooks for one tile per block, taken from `blockIdx`.
    #[inline(always)]
    pub fn new() -> Self {
        Self { taken: false }
    }
}

impl Default for NoHooks {
    fn default() -> Self {
        Self::new()
    }
}

impl StageHooks for NoHooks {
    #[inline(always)]
    unsafe fn next_tile(&mut self, grid: Grid) -> Option<TileIdx> {
        if self.taken {
            return None;
        }
        self.taken = true;
        let t = TileIdx::new(
            crate::ptx::ids::ctaid_x(),
            crate::ptx::ids::ctaid_y(),
            crate::ptx::ids::ctaid_z(),
        );
        if grid.contains(t) {
            Some(t)
        } else {
            None
        }
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, _tile: TileIdx, _k_step: u32) -> bool {
        true
    }

    #[inline(always)]
    unsafe fn post(&mut self, _tile: TileIdx) {}
}

/// What the skinny GeMM (`crate::kernels::gemm::skinny`) asks of its stage. Its unit of work
/// is a block's *range* of the weight (`cusync_shared::skinny::SkinnyPlan::range`), not a
/// tile; its stage's tiles are the output's 64-column blocks, each complete once its last
/// contributor stored it. Every method is called by every thread of the block.
pub trait SkinnyHooks {
    /// Whether the dependent operand (A) may be written while the launch runs (a stream-mode
    /// consumer): its loads then go through L2 (`ld.global.cg`) instead of the non-coherent
    /// path.
    const A_IN_FLIGHT: bool;

    /// The range this block computes (`< ctas`), or `None` when it has none.
    ///
    /// # Safety
    /// Called by every thread of the block, once.
    unsafe fn range(&mut self, ctas: u32) -> Option<u32>;

    /// Before the A loads of a segment of output column block `col_block` that reads A's K
    /// elements `[k_begin, k_end)`. `false`: a wait timed out (it was reported); the block must
    /// stop.
    ///
    /// # Safety
    /// Called by every thread of the block.
    unsafe fn wait_k(&mut self, col_block: u32, k_begin: u32, k_end: u32) -> bool;

    /// After every thread's final stores of output column block `col_block` were issued (by
    /// its sole contributor or its last arrival); `t_start` is when this block's segment of it
    /// began its main loop, after its wait (0 untraced). A column block's trace event is its
    /// completing block's segment.
    ///
    /// # Safety
    /// Called by every thread of the block.
    unsafe fn post_col_block(&mut self, col_block: u32, t_start: u64);

    /// Whether the segments' start times are wanted ([`SkinnyHooks::post_col_block`]'s
    /// `t_start`).
    fn traced(&self) -> bool;
}

impl SkinnyHooks for NoHooks {
    const A_IN_FLIGHT: bool = false;

    #[inline(always)]
    unsafe fn range(&mut self, ctas: u32) -> Option<u32> {
        let cta = crate::ptx::ids::ctaid_x();
        (cta < ctas).then_some(cta)
    }

    #[inline(always)]
    unsafe fn wait_k(&mut self, _col_block: u32, _k_begin: u32, _k_end: u32) -> bool {
        true
    }

    #[inline(always)]
    unsafe fn post_col_block(&mut self, _col_block: u32, _t_start: u64) {}

    #[inline(always)]
    fn traced(&self) -> bool {
        false
    }
}

/// The tile record of a warp-specialized kernel (GeMM path 2): the producer thread writes one
/// into shared memory with every pipeline stage it fills, and the consumer warpgroups read it
/// after that stage's `full` barrier, so the tile travels with its data. `tm >= WS_STOP` means
/// "no more tiles" (the stage carries no data). `cusync_shared::gemm_sm90::WG_TILE_RECORD_BYTES`
/// is its size.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct WsTile {
    /// Row tile (the stage grid's `x`).
    pub tm: u32,
    /// Column tile (the stage grid's `y`).
    pub tn: u32,
    /// Linear id in the stage's grid (for posts and traces).
    pub id: u32,
    /// Split-K split of the tile this unit computes (0 without split-K).
    pub split: u32,
    /// The stage the tile belongs to: 0 in single-stage kernels; in the path-2 persistent
    /// megakernel, the stage's index in the launch's descriptors ([`WsHooks::params`] turns
    /// it into that stage's operands and tensor maps).
    pub stage: u32,
    /// Padding; always 0.
    pub _pad: u32,
    /// When the producer took the tile (`%globaltimer`, 0 when not traced).
    pub t_dispatch: u64,
    /// When its first dependent wait returned.
    pub t_ready: u64,
}

const _: () = assert!(core::mem::size_of::<WsTile>() == cusync_shared::gemm_sm90::WG_TILE_RECORD_BYTES as usize);

/// `WsTile::tm` at or above this: the producer has no more tiles (or gave up after a timed-out
/// wait); the consumers leave.
pub const WS_STOP: u32 = u32::MAX - 1;

/// What a warp-specialized tile kernel (one producer thread, consumer warpgroups) asks of its
/// stage, or of its DAG of stages. Unlike [`StageHooks`], no method is block-wide: the producer
/// thread takes tiles and waits; one consumer thread posts, after the consumers' named barrier.
///
/// Single-stage hooks (the plain kernels' raster order, stream mode) implement the four
/// required methods and keep the defaults: every tile's parameters are the kernel's own, no
/// post warp. The path-2 persistent megakernel (`crate::persistent::sm90`) overrides
/// [`WsHooks::params`] (each tile's stage has its own operands and tensor maps) and runs its
/// posts in a separate warp ([`WsHooks::POST_WARP`], [`WsHooks::serve_posts`],
/// [`WsHooks::consumers_done`]).
pub trait WsHooks {
    /// Whether [`WsHooks::post`] does anything (else the kernel skips the consumers' barrier).
    const POSTS: bool;

    /// Whether the operand [`WsHooks::wait_dependent`] guards is the kernel's B (a stage whose
    /// kernel computes its output transposed: the stage's A, the producer's output, is the
    /// swapped product's B). The producer then issues A's loads (the independent operand,
    /// optimization R) before the wait and B's after it. Default: no (A is the dependent
    /// operand; B's loads come first).
    const DEPENDENT_B: bool = false;

    /// Whether the kernel follows the parameter's stream-K plan (`sk_units`, plain kernels)
    /// rather than its split-K factor (stream-mode stages, whose tiles come from the stage's
    /// order). Default: no.
    const STREAM_K: bool = false;

    /// Blocks per cluster (1 or 2). With 2, the pair's producers each load half of B's
    /// stage and multicast it to both blocks (whose tiles must share B's columns), consumers
    /// release stages in both blocks, and every thread meets at a cluster barrier before
    /// exit. Default: 1.
    const CLUSTER: u32 = 1;

    /// Whether the producer thread waits for each tile's first free pipeline stage inside its
    /// K loop, after the tile's parameters and K segment (one free-stage wait site), rather
    /// than right after taking the tile. The plain kernels' producer then runs without spills
    /// under its 56 registers (ptxas, `gemm_sm90_bf16_128x192`: 12 / 180 bytes of spill
    /// stores / loads before, none after) and the kernels ran 1-2.5% faster (perf-notes,
    /// session 17 run 2); the hooked stream-mode stages were slower that way (their 128 x 64
    /// stages by 5%), so they keep the wait first; with their 88-register producer (session
    /// 19) the loop was tried again and was still not faster (serialized MLP B = 1024, RowSync
    /// over StreamSync +3.7% / +4.4% against +3.3% / +3.7% without). Kernels with 128 x 256
    /// tiles keep it first whatever the hooks say (session 18 run 1). Default: no.
    const FREE_WAIT_IN_K_LOOP: bool = false;

    /// Whether the launch parameter's `pipeline_depth` sets the stages of the ring in use
    /// (`cusync_shared::gemm_sm90::ring_stages`). Without it the ring is the tile's whole,
    /// a compile-time bound: the megakernel keeps the code it had before the depth existed
    /// (reading the depth from its global parameters added 3 spill loads to its SASS).
    /// Default: yes.
    const PIPELINE_DEPTH: bool = true;

    /// Whether warp 1 of the producer warpgroup stays alive to run [`WsHooks::serve_posts`]
    /// (otherwise every producer-warpgroup thread but the producer exits at once).
    const POST_WARP: bool = false;

    /// Whether warp 2 of the producer warpgroup stays alive to run [`WsHooks::serve_polls`]:
    /// it reads the semaphores of the producer thread's current and next tile ahead of the
    /// producer, so the producer's waits find them met in shared memory instead of making
    /// their own round trips to L2. Default: no.
    const POLL_WARP: bool = false;

    /// Whether warp 2 of the producer warpgroup stays alive to run
    /// [`WsHooks::serve_schedule`]: the block's scheduler, which pops tiles and hands them to
    /// the producer thread, so the producer's K loop makes no calls (and keeps its few
    /// registers). Excludes [`WsHooks::POLL_WARP`] (the same warp). Default: no.
    const SCHED_WARP: bool = false;

    /// Registers the producer warpgroup keeps (`setmaxnreg.dec`) and each consumer
    /// warpgroup takes (`setmaxnreg.inc`): one of the splits in `cusync_shared::gemm_sm90`.
    /// Default: [`WG_PRODUCER_REGS`](cusync_shared::gemm_sm90::WG_PRODUCER_REGS) /
    /// [`WG_CONSUMER_REGS`](cusync_shared::gemm_sm90::WG_CONSUMER_REGS).
    const REGS: (u32, u32) = (
        cusync_shared::gemm_sm90::WG_PRODUCER_REGS,
        cusync_shared::gemm_sm90::WG_CONSUMER_REGS,
    );

    /// The split for tiles wider than 192 columns (128 x 256), whose consumers hold 128
    /// accumulators per thread. Default: [`WsHooks::REGS`].
    const REGS_WIDE: (u32, u32) = Self::REGS;

    /// Producer thread: the next work unit of a `tiles_m x tiles_n` grid whose tiles are each
    /// split `splits` ways along K (split-K; 1: none), or `None` when done. A tile's splits
    /// are handed out one after another; with stream-K (`p.sk_units != 0`, plain kernels
    /// only) `split` is the unit that computes the tile's segment
    /// (`cusync_shared::stream_k::k_segment`). (`p`, `tiles_m`, `tiles_n` and `splits` are
    /// the kernel parameter's; hooks whose tiles carry their own stage ignore them.)
    ///
    /// # Safety
    /// Called by the producer thread only.
    unsafe fn next_tile(&mut self, p: &TmaGemmParams, tiles_m: u32, tiles_n: u32, splits: u32) -> Option<WsTile>;

    /// Whether this launch posts at all (checked once per tile, uniformly over the consumers):
    /// a stream-mode stage with no consumer edge, no trace and no fault injection skips the
    /// consumers' barrier and the post. Default: [`WsHooks::POSTS`].
    #[inline(always)]
    fn posts_now(&self) -> bool {
        Self::POSTS
    }

    /// Producer thread, at block entry, before the block's setup: a chance to start the first
    /// tile's lookup early (a stream-mode stage takes its first ticket here, so the atomic's
    /// round trip overlaps the barrier setup). Default: nothing.
    ///
    /// # Safety
    /// Called by the producer thread only, once, before its first [`WsHooks::next_tile`].
    #[inline(always)]
    unsafe fn at_entry(&mut self) {}

    /// Whether the consumers call [`WsHooks::post`] after each tile even though
    /// [`WsHooks::POSTS`] is `false` (a plain kernel writing its trace). Default: no.
    #[inline(always)]
    fn traces(&self) -> bool {
        false
    }

    /// Producer thread, before it loads K-step `k_step` (in units of the kernel's K tile) of
    /// the dependent operand of `tile`. `false`: the wait timed out (it was reported).
    ///
    /// # Safety
    /// Called by the producer thread only.
    unsafe fn wait_dependent(&mut self, tile: &mut WsTile, k_step: u32) -> bool;

    /// Producer thread, once per work unit, halfway through issuing its loads: a chance to
    /// take the next unit ahead (the persistent megakernel polls its queues here). Default:
    /// nothing.
    ///
    /// # Safety
    /// Called by the producer thread only.
    #[inline(always)]
    unsafe fn prefetch(&mut self) {}

    /// One consumer thread, after every consumer thread's stores of `tile` were issued (the
    /// kernel's named barrier); `t_start` is when the consumers began the tile. With split-K,
    /// only for the unit that completed the tile.
    ///
    /// # Safety
    /// Called by one thread, once per tile.
    unsafe fn post(&mut self, tile: &WsTile, t_start: u64);

    /// The parameters (problem, epilogue, tensor maps) of `tile`, given the kernel's own `p`.
    /// The producer reads the tensor maps and K through it, the consumers K and the
    /// epilogue's fields; the pipeline's error slot, timeout and split-K factor stay `p`'s.
    /// Default: `p` (a single-stage kernel).
    ///
    /// # Safety
    /// `tile` was handed out by [`WsHooks::next_tile`] of these hooks (in any thread's copy).
    #[inline(always)]
    unsafe fn params<'a>(&self, p: &'a TmaGemmParams, _tile: &WsTile) -> &'a TmaGemmParams {
        p
    }

    /// The stage id a timed-out pipeline wait reports for a tile of stage index `stage`
    /// (`u32::MAX`: the wait was for no particular tile). Default: 0. Only called on the
    /// (cold) timeout path.
    ///
    /// # Safety
    /// Called by any thread of the block.
    #[inline(always)]
    unsafe fn stage_id(&self, _stage: u32) -> u32 {
        0
    }

    /// With [`WsHooks::POST_WARP`]: all 32 lanes of warp 1 of the producer warpgroup, once,
    /// after the block's setup barrier: serve the tiles handed over by [`WsHooks::post`] until
    /// [`WsHooks::consumers_done`] says the consumers left. Default: nothing.
    ///
    /// # Safety
    /// Every lane of that warp calls it (`lane` is its lane index).
    #[inline(always)]
    unsafe fn serve_posts(&mut self, _lane: u32) {}

    /// With [`WsHooks::POLL_WARP`]: all 32 lanes of warp 2 of the producer warpgroup, once,
    /// after the block's setup barrier: poll the dependencies of the producer's tiles ahead of
    /// it until [`WsHooks::producer_done`] says the producer left. Every wait in it is
    /// bounded; it reports nothing (the producer's own waits do). Default: nothing.
    ///
    /// # Safety
    /// Every lane of that warp calls it (`lane` is its lane index); `p` is the kernel's.
    #[inline(always)]
    unsafe fn serve_polls(&mut self, _p: &TmaGemmParams, _lane: u32) {}

    /// With [`WsHooks::SCHED_WARP`]: lane `lane` of warp 2 of the producer warpgroup, once,
    /// after the block's setup barrier: pop the block's tiles and hand them to the producer
    /// thread (whose [`WsHooks::next_tile`] takes them) until a stop item is handed over or
    /// the producer left. Every wait in it is bounded. Default: nothing.
    ///
    /// # Safety
    /// Every lane of that warp calls it (`lane` is its lane index).
    #[inline(always)]
    unsafe fn serve_schedule(&mut self, _lane: u32) {}

    /// The producer thread, once, when it returns (for any reason): the poll warp may leave.
    /// Default: nothing.
    ///
    /// # Safety
    /// Called by the producer thread only.
    #[inline(always)]
    unsafe fn producer_done(&mut self) {}

    /// The posting consumer thread (the one that calls [`WsHooks::post`]), once, when the
    /// consumers leave (no more tiles, or a failed wait). Default: nothing.
    ///
    /// # Safety
    /// Called by that one thread, after its last [`WsHooks::post`].
    #[inline(always)]
    unsafe fn consumers_done(&mut self) {}
}
