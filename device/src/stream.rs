//! Stream mode on the device: the CuSync stage protocol (`start`, `tile`, `wait`, `post`) as
//! [`StageHooks`], driven by a [`StageDesc`] the host wrote.
//!
//! * `start`: every block adds one to the stage's start count, so the wait kernel in front of
//!   a consumer knows the producer's blocks are resident (every block of a persistent stage,
//!   the first of a stage with a block per tile: `cusync_shared::lanes::start_target`). A
//!   relaxed atomic: the count publishes no data (the consumer's reads of the producer's
//!   output are ordered by the semaphores), so no fence delays the block's first work. It
//!   then issues `griddepcontrol.launch_dependents`: a consumer launched on the same stream
//!   with programmatic dependent launch (sm_90) starts when every producer block has, which
//!   is the wait kernel's guarantee without the wait kernel or a second stream.
//! * `tile`: thread 0 takes a ticket from the stage's counter (count-up-for-ever: launch `epoch`
//!   draws `epoch * tiles ..`), maps it through the stage's order (built-in or a host buffer)
//!   and broadcasts it through shared memory; the tile comes from the order, never `blockIdx`.
//!   (GeMM path 2's persistent stages walk the order in lanes by block index instead:
//!   `cusync_shared::lanes`.)
//! * `wait`: before the dependent operand's loads of a K-step, the policy (a pure function in
//!   `cusync_shared::policy`) names the semaphore and value; thread 0 spins (bounded), then the
//!   block synchronizes. A tile waits once per producer column tile it enters, and skips a
//!   semaphore it already waited on. A warp-specialized producer probes a unit's first wait
//!   (one acquire) as it takes the unit, before its free-stage wait, and reads the rest ahead
//!   through the poll warp where that pays (`cusync_shared::lanes::poll_pays`).
//! * `post`: after the tile's stores, `bar.sync`, `fence.acq_rel.gpu`, `red.relaxed.gpu.add`
//!   (together a release pattern: `crate::sync::thread_post_gpu`). An edge whose consumer is
//!   on another GPU (`EdgeDesc::scope` = system, see `cusync_shared::placement`) posts with
//!   `fence.sc.sys` and `red.relaxed.sys`, and its consumer waits with `ld.acquire.sys`.
//!
//! With tracing on (`desc.trace != 0`), thread 0 writes one [`TraceEvent`] per tile (a
//! warp-specialized stage: the posting consumer thread; its block's first unit dispatched at
//! the block's entry, as in the plain kernels).

use crate::ptx::{atomics, barrier, griddep, ids, smem, time};
use crate::stage::{SkinnyHooks, StageHooks};
use crate::sync::{self, reached, WaitSite};
use cusync_shared::lanes;
use cusync_shared::layout::{ErrorCode, ErrorSlot, StageDesc, TraceEvent, DEBUG_DELAY, DEBUG_SKIP_POST};
use cusync_shared::order::{self, TileOrder};
use cusync_shared::placement::Scope;
use cusync_shared::policy::{PolicyKind, Step, SyncPolicy};
use cusync_shared::{Grid, TileIdx};

crate::static_shared!(fn tile_broadcast() -> *mut u32, cusync_stream_tile_broadcast, 16);

// The poll warp's hand-over (warp-specialized stages, `cusync_shared::lanes`): two 64-bit
// slots at 0 and 8, the producer's current unit at 16; the block's entry time at 24.
crate::static_shared!(fn poll_state() -> *mut u64, cusync_stream_poll_state, 32);

/// Byte offset of the producer's current-unit word in `poll_state`.
const POLL_CURRENT: u32 = 16;

/// Byte offset of the block's entry time in `poll_state` (`%globaltimer`, written only when the
/// stage traces): its first unit's `t_dispatch`, as the plain kernels' first tile has
/// (`RasterHooks::t_entry`), so a traced stage and its plain kernel time a block's first tile
/// from the same point. Kept in shared memory, not in the producer thread's registers.
const POLL_ENTRY: u32 = 24;

/// The poll warp's sleep between polls of a unit's unmet semaphores (the producer makes its
/// own wait for the one it needs first, so this only paces the look-ahead).
const POLL_RETRY_NS: u32 = 1000;

/// The poll warp's sleep while it waits for the producer to reach its unit: a whole tile's
/// time (tens of µs) is left to poll the next unit, and a warp that wakes less often takes
/// fewer issue slots and instruction-cache lines from the consumer warps beside it.
const POLL_IDLE_NS: u32 = 2000;

/// A stage's hooks in stream mode: one tile per block.
///
/// `TRANSPOSED` (warp-specialized kernels only): the kernel computes the stage's output
/// transposed (a swapped GeMM, `C^T = B^T A^T`: the skinny products' 128 x 64 tile), so its
/// tile `(tm, tn)` is the stage's tile `(tn, tm)` and the operand the stage depends on is the
/// kernel's B. Orders, waits, posts and traces all speak of the stage's (untransposed) tiles;
/// only the kernel's tile coordinates and the order of its loads differ.
pub struct StreamStage<'a, const TRANSPOSED: bool = false> {
    desc: &'a StageDesc,
    /// The kernel's K tile (elements per `wait_dependent` step).
    k_tile: u32,
    taken: bool,
    /// The first K-step of the current tile that may need a wait: every `wait_dependent` call
    /// below it returns at once (one compare in the mainloop's hot path).
    next_wait_step: u32,
    /// Semaphore last waited on in the current tile (`u32::MAX`: none yet); on an edge with an
    /// affine schedule, the number of the tile's waits made (`u32::MAX`: none yet).
    last_sem: u32,
    /// No wait was made for the current tile (or split-K unit) yet: the first one covers the
    /// producer columns from 0, so a unit that starts mid-row waits on everything a whole
    /// tile's first steps would (correct for any policy whose waits grow with the prefix).
    fresh_tile: bool,
    /// Warp-specialized kernels: the next work unit of the block's lane
    /// (`cusync_shared::lanes`), `None` when its lane is done.
    lane_next: Option<u32>,
    /// Warp-specialized kernels: the producer's current work unit (the poll warp's slots are
    /// keyed by it).
    unit: u32,
    event: TraceEvent,
}

impl<'a, const TRANSPOSED: bool> StreamStage<'a, TRANSPOSED> {
    /// Starts the stage's work in this block (CuSync `stage.start()`): counts the block in the
    /// stage's start count.
    ///
    /// # Safety
    /// `desc` was written by the host for this launch; every thread of the block calls this.
    #[inline(always)]
    pub unsafe fn start(desc: &'a StageDesc, k_tile: u32) -> Self {
        if ids::thread_linear() == 0 {
            if desc.start_count != 0 {
                // The value is unused: the count is the wait kernel's (`cusync_shared::lanes`).
                unsafe { atomics::atom_add_relaxed_gpu(desc.start_count as *mut u32, 1) };
            }
            // A consumer launched behind this stage with programmatic dependent launch may
            // start once every block of this stage is resident: the wait kernel's guarantee,
            // given by the hardware (no effect without such a consumer).
            griddep::launch_dependents();
        }
        Self {
            desc,
            k_tile,
            taken: false,
            next_wait_step: 0,
            last_sem: u32::MAX,
            fresh_tile: true,
            lane_next: None,
            unit: lanes::POLL_PRODUCER_DONE,
            event: TraceEvent::default(),
        }
    }

    #[inline(always)]
    fn site(&self, tile: TileIdx) -> WaitSite {
        WaitSite {
            stage: self.desc.stage,
            tile: self.desc.grid.linear(tile),
            error: self.desc.error as *mut ErrorSlot,
            timeout_ns: self.desc.timeout_ns,
        }
    }

    /// `%globaltimer` when the stage traces, else 0: an untraced stage reads no clock on its
    /// tiles' critical path (the producer thread's, between a tile's ticket and its loads).
    #[inline(always)]
    fn trace_time(&self) -> u64 {
        if self.desc.trace != 0 {
            time::global_timer_ns()
        } else {
            0
        }
    }

    /// Resets the per-tile wait state for a new tile (or split-K unit). A stage with no wait
    /// edge starts past its last K-step, so `wait_dependent` never leaves its hot path (no
    /// cold call at K-step 0, no clock read).
    #[inline(always)]
    fn begin_tile(&mut self) {
        self.next_wait_step = if self.desc.wait.sems == 0 { u32::MAX } else { 0 };
        self.last_sem = u32::MAX;
        self.fresh_tile = true;
    }

    /// Thread 0: the tile of ticket `ticket` of this launch.
    #[inline(always)]
    unsafe fn tile_of_ticket(&self, ticket: u32) -> u32 {
        let grid = self.desc.grid;
        if self.desc.order_buf != 0 {
            unsafe { *(self.desc.order_buf as *const u32).add(ticket as usize) }
        } else {
            let order = TileOrder::decode([self.desc.order, self.desc.order_param]).unwrap_or(TileOrder::RowMajor);
            grid.linear(order::nth(order, grid, ticket))
        }
    }
}

impl<const TRANSPOSED: bool> StreamStage<'_, TRANSPOSED> {
    /// The stage's tile of the kernel's tile `tile` (its transpose when `TRANSPOSED`).
    #[inline(always)]
    fn stage_tile(tile: &crate::stage::WsTile) -> TileIdx {
        if TRANSPOSED {
            TileIdx::new(tile.tn, tile.tm, 0)
        } else {
            TileIdx::new(tile.tm, tile.tn, 0)
        }
    }

    /// The wait (if any) before K-step `k_step`, and where the next one may be needed. Block
    /// mode (`thread_only == false`): every thread calls it, thread 0 spins, the block
    /// synchronizes. Thread mode: only the calling thread (thread 0, a warp-specialized
    /// kernel's producer) spins; no barrier. With the edge's affine schedule (the host's
    /// `WaitSchedule::derive`), [`Self::wait_scheduled`]; else the policy's walk, column by
    /// column.
    #[inline(always)]
    unsafe fn wait_slow(&mut self, tile: TileIdx, k_step: u32, thread_only: bool) -> bool {
        // Block mode's trace: the main loop started at the first cold call (thread mode keeps
        // no trace state here; its tile record carries the times).
        if !thread_only && self.desc.trace != 0 && ids::thread_linear() == 0 && self.event.t_start == 0 {
            self.event.t_start = time::global_timer_ns();
        }
        let edge = &self.desc.wait;
        if edge.sems == 0 {
            self.next_wait_step = u32::MAX;
            return true;
        }
        if edge.schedule.is_some() {
            return unsafe { self.wait_scheduled(tile, k_step, thread_only) };
        }
        let policy = PolicyKind::decode(edge.policy).unwrap_or(PolicyKind::NoSync);
        let step_of = |col: u32| Step {
            row: tile.x,
            k: col,
            first_in_row: col == 0,
        };
        let (tile_n, k_tile) = (edge.producer_tile_n.max(1), self.k_tile.max(1));
        // The producer column tiles this K-step reads (a step may straddle two columns when the
        // producer's tile width is not a multiple of the K step).
        let first = if core::mem::replace(&mut self.fresh_tile, false) {
            0
        } else {
            (k_step * k_tile) / tile_n
        };
        let last = (((k_step + 1) * k_tile - 1) / tile_n).min(edge.producer.y.saturating_sub(1));
        for col in first..=last {
            if let Some(w) = policy.wait(edge.producer, edge.consumer, tile, step_of(col)) {
                if w.semaphore != self.last_sem {
                    self.last_sem = w.semaphore;
                    if !unsafe { self.wait_semaphore(tile, w.semaphore, w.target(self.desc.epoch), thread_only) } {
                        return false;
                    }
                }
            }
        }
        // Skip ahead over producer columns that need no new wait (RowSync: every column after
        // the first; TileSync: none), so the K-steps before the next one stay on the hot path.
        let mut c = last + 1;
        while c < edge.producer.y {
            match policy.wait(edge.producer, edge.consumer, tile, step_of(c)) {
                Some(w) if w.semaphore != self.last_sem => break,
                _ => c += 1,
            }
        }
        // The first K-step that reads column `c`.
        self.next_wait_step = if c >= edge.producer.y {
            u32::MAX
        } else {
            (c * tile_n) / k_tile
        };
        true
    }

    /// [`Self::wait_slow`] on the edge's affine schedule: every wait of the tile due by the end
    /// of K-step `k_step` (from the tile's first, for a split-K unit that starts mid-row), each
    /// one add and one acquire; `last_sem` counts the waits made. No policy dispatch, no
    /// division by the producer's tile width, no scan: the producer thread spends its time on
    /// the pipeline (session 17: TileSync's 32 generic walks per GeMM2 tile cost 18%).
    #[inline(always)]
    unsafe fn wait_scheduled(&mut self, tile: TileIdx, k_step: u32, thread_only: bool) -> bool {
        let schedule = self.desc.wait.schedule;
        let end = (k_step + 1) * self.k_tile;
        let target = schedule.target(self.desc.epoch);
        let mut i = if self.last_sem == u32::MAX { 0 } else { self.last_sem };
        let sys = Scope::decode(self.desc.wait.scope).is_some_and(Scope::is_sys);
        if thread_only && !sys && lanes::poll_pays(schedule.waits) {
            // The poll warp's count of this unit's met waits (`cusync_shared::lanes`): the
            // acquire pairs with its release, which follows its lanes' acquires of the
            // semaphores, so the waits it covers are made.
            let slot = smem::to_shared_addr(poll_state()) + 8 * lanes::poll_slot(self.unit, ids::nctaid_x());
            // SAFETY: an 8-byte slot of the static buffer above.
            let covered = lanes::covered_waits(unsafe { smem::ld_acquire_cta_u64(slot) }, self.unit, i);
            if covered > i {
                i = covered.min(schedule.waits);
                // As in `wait_semaphore`: the TMA loads after the acquire.
                #[cfg(target_feature = "sm_90a")]
                crate::ptx::fence::proxy_async_global();
            }
        }
        while i < schedule.waits && schedule.k_elem(i) < end {
            let index = schedule.wait(tile.x, i).semaphore;
            // Thread mode at GPU scope: four consecutive semaphores (from a 16-byte aligned
            // one) in one round trip; all four met, the next three waits are
            // made too (a met semaphore stays met for the launch), else wait on this one alone.
            let sem = (self.desc.wait.sems as *const u32).wrapping_add(index as usize);
            if thread_only && !sys && (sem as usize).is_multiple_of(16) && i + 4 <= schedule.waits {
                // SAFETY: `index + 3` is a semaphore of the edge (wait `i + 3` exists), and the
                // address is 16-byte aligned (checked).
                let seen = unsafe { crate::ptx::atomics::ld_acquire_gpu_v4(sem) };
                if seen.iter().all(|&v| cusync_shared::policy::reached(v, target)) {
                    // As in `wait_semaphore`: the TMA loads after the acquire.
                    #[cfg(target_feature = "sm_90a")]
                    crate::ptx::fence::proxy_async_global();
                    if self.desc.trace != 0 && ids::thread_linear() == 0 {
                        self.event.t_ready = time::global_timer_ns();
                    }
                    i += 4;
                    continue;
                }
            }
            if !unsafe { self.wait_semaphore(tile, index, target, thread_only) } {
                return false;
            }
            i += 1;
        }
        self.last_sem = i;
        self.next_wait_step = schedule.next_wait_step(i, self.k_tile);
        true
    }

    /// Warp-specialized producer, right after it takes a unit and before it waits for the
    /// unit's first free pipeline stage: one acquire of the unit's first scheduled wait. Met,
    /// the wait is made here, under the free-stage wait's slack, and the unit's first
    /// dependent loads follow its independent ones at once (else each unit's A loads waited
    /// one L2 round trip after its B loads). Unmet, nothing changes: `wait_dependent` makes the
    /// bounded (reported) wait as before. Only edges with an affine schedule at GPU scope on
    /// which no poll warp runs (`lanes::poll_pays`: RowSync's one wait a tile). The block's
    /// first unit, with no slack to hide under, is probed too: without it the serialized MLP
    /// kept its cost (docs/perf-notes.md, session 25 run 5).
    ///
    /// # Safety
    /// The producer thread of a warp-specialized stream stage, after `begin_tile`.
    #[inline(always)]
    unsafe fn probe_first_wait(&mut self, tile: TileIdx) {
        let edge = &self.desc.wait;
        let schedule = edge.schedule;
        if edge.sems == 0
            || !schedule.is_some()
            || lanes::poll_pays(schedule.waits)
            || Scope::decode(edge.scope).is_some_and(Scope::is_sys)
        {
            return;
        }
        let sem = (edge.sems as *const u32).wrapping_add(schedule.wait(tile.x, 0).semaphore as usize);
        // SAFETY: wait 0 of the tile's row names a semaphore of the edge.
        if reached(
            unsafe { atomics::ld_acquire_gpu(sem) },
            schedule.target(self.desc.epoch),
        ) {
            // As in `wait_semaphore`: the TMA loads after the acquire.
            #[cfg(target_feature = "sm_90a")]
            crate::ptx::fence::proxy_async_global();
            self.last_sem = 1;
            self.next_wait_step = schedule.next_wait_step(1, self.k_tile);
        }
    }

    /// One bounded wait for semaphore `index` of the wait edge to reach `target` (thread or
    /// block mode, as [`Self::wait_slow`]), then, in thread mode on sm_90a, the proxy fence the
    /// producer's TMA loads need; traced, the time it returned.
    #[inline(always)]
    unsafe fn wait_semaphore(&mut self, tile: TileIdx, index: u32, target: u32, thread_only: bool) -> bool {
        let edge = &self.desc.wait;
        let sem = (edge.sems as *const u32).wrapping_add(index as usize);
        let sys = Scope::decode(edge.scope).is_some_and(Scope::is_sys);
        let site = self.site(tile);
        let ok = if thread_only {
            let ok = unsafe { sync::thread_wait(sem, target, &site, sys, ErrorCode::SemaphoreTimeout) };
            if ok {
                // The waiting thread issues the dependent loads through TMA (the async
                // proxy): order them after its generic-proxy acquire.
                #[cfg(target_feature = "sm_90a")]
                crate::ptx::fence::proxy_async_global();
            }
            ok
        } else {
            unsafe { sync::block_wait(sem, target, &site, sys) }
        };
        if ok && self.desc.trace != 0 && ids::thread_linear() == 0 {
            self.event.t_ready = time::global_timer_ns();
        }
        ok
    }

    /// The semaphore `tile`'s post adds to, the amount, and whether at system scope; `None`
    /// when this stage posts to no edge or the policy posts nothing for the tile.
    #[inline(always)]
    fn post_target(&self, tile: TileIdx) -> Option<(*mut u32, u32, bool)> {
        let edge = &self.desc.post;
        if edge.sems == 0 {
            return None;
        }
        let policy = PolicyKind::decode(edge.policy).unwrap_or(PolicyKind::NoSync);
        let p = policy.post(edge.producer, edge.consumer, tile)?;
        let sem = (edge.sems as *mut u32).wrapping_add(p.semaphore as usize);
        Some((sem, p.amount, Scope::decode(edge.scope).is_some_and(Scope::is_sys)))
    }

    /// The poll warp (`cusync_shared::lanes`): walks the block's lane (units `splits` to a
    /// tile) ahead of the producer thread; for each unit polls the tile's waits, 32 at a time
    /// (lane `l` the `l`-th), and publishes the met prefix in the unit's slot, until all are
    /// met or the producer is past the unit; then waits for the producer to reach the unit
    /// before taking the next. Only edges with an affine schedule at GPU scope and more waits
    /// a tile than one round trip of the producer reads (`lanes::poll_pays`); every loop is
    /// bounded by the stage's timeout (the warp then leaves: the producer's own waits report).
    /// All decisions are lane 0's, broadcast, so the warp stays converged for its votes.
    ///
    /// # Safety
    /// Every lane of warp 2 of a warp-specialized stream stage calls it, after the setup
    /// barrier that ordered `at_entry`'s initialisation.
    #[inline(always)]
    unsafe fn poll_lane(&self, splits: u32, lane: u32) {
        let edge = &self.desc.wait;
        let schedule = edge.schedule;
        if edge.sems == 0
            || !schedule.is_some()
            || !lanes::poll_pays(schedule.waits)
            || Scope::decode(edge.scope).is_some_and(Scope::is_sys)
        {
            return;
        }
        let state = smem::to_shared_addr(poll_state());
        let blocks = ids::nctaid_x();
        let units = self.desc.grid.count() * splits;
        let target = schedule.target(self.desc.epoch);
        let timeout = self.desc.timeout_ns;
        // Lane 0's read of the producer's current unit, for every lane.
        // SAFETY: the current-unit word of the static buffer.
        let producer_unit = || barrier::shfl_idx(unsafe { smem::ld_volatile_u32(state + POLL_CURRENT) }, 0);
        let expired = |since: u64| barrier::shfl_idx((time::global_timer_ns() - since > timeout) as u32, 0) != 0;
        let mut unit = ids::ctaid_x();
        while unit < units {
            // SAFETY: a ticket below the stage's tile count.
            let row = self.desc.grid.tile(unsafe { self.tile_of_ticket(unit / splits) }).x;
            let sems = (edge.sems as *const u32).wrapping_add(schedule.wait(row, 0).semaphore as usize);
            let slot = state + 8 * lanes::poll_slot(unit, blocks);
            let since = time::global_timer_ns();
            let mut met = 0;
            loop {
                let before = met;
                while met < schedule.waits {
                    let i = met + lane;
                    // SAFETY: wait `i` of the row's schedule is a semaphore of the edge.
                    let ok = i >= schedule.waits
                        || reached(unsafe { atomics::ld_acquire_gpu(sems.add(i as usize)) }, target);
                    let ballot = barrier::ballot(ok);
                    met = lanes::met_prefix(met, ballot, schedule.waits);
                    if ballot != u32::MAX {
                        break;
                    }
                }
                if met > before {
                    // Every lane's acquire before lane 0's release (`bar.warp.sync` orders
                    // memory among the warp's threads).
                    barrier::sync_warp();
                    if lane == 0 {
                        // SAFETY: an 8-byte slot of the static buffer.
                        unsafe { smem::st_release_cta_u64(slot, lanes::pack_poll(unit, met)) };
                    }
                }
                let current = producer_unit();
                if met >= schedule.waits || lanes::producer_past(current, unit) {
                    break;
                }
                if expired(since) {
                    return;
                }
                time::nanosleep(POLL_RETRY_NS);
            }
            let Some(next) = lanes::next_in_lane(unit, blocks, units) else {
                return;
            };
            // At most one unit ahead: the next unit's slot is the previous one's.
            let since = time::global_timer_ns();
            loop {
                let current = producer_unit();
                if current == lanes::POLL_PRODUCER_DONE {
                    return;
                }
                if current >= unit {
                    break;
                }
                if expired(since) {
                    return;
                }
                time::nanosleep(POLL_IDLE_NS);
            }
            unit = next;
        }
    }

    /// Test-only fault and delay injection; returns `true` when the post must be skipped.
    #[cold]
    unsafe fn debug_before_post(&self, tile: TileIdx, delayer: bool) -> bool {
        let id = self.desc.grid.linear(tile);
        if self.desc.debug_flags & DEBUG_DELAY != 0 && delayer && self.desc.debug_param > 0 {
            // A cheap hash of (tile, epoch) picks the delay.
            let h = (id ^ self.desc.epoch.wrapping_mul(0x9e37_79b9)).wrapping_mul(0x85eb_ca6b);
            let until = time::global_timer_ns() + (h % self.desc.debug_param) as u64;
            while time::global_timer_ns() < until {
                time::nanosleep(500);
            }
        }
        self.desc.debug_flags & DEBUG_SKIP_POST != 0 && id == self.desc.debug_param
    }
}

impl StageHooks for StreamStage<'_> {
    #[inline(always)]
    unsafe fn next_tile(&mut self, grid: Grid) -> Option<TileIdx> {
        if self.taken {
            return None;
        }
        self.taken = true;
        let slot = tile_broadcast();
        let count = grid.count();
        if ids::thread_linear() == 0 {
            let t = self.trace_time();
            let ticket = unsafe { atomics::atom_add_relaxed_gpu(self.desc.tile_counter as *mut u32, 1) };
            let n = ticket.wrapping_sub(self.desc.epoch.wrapping_mul(count));
            let id = if n < count {
                unsafe { self.tile_of_ticket(n) }
            } else {
                u32::MAX
            };
            unsafe { slot.write_volatile(id) };
            self.event.t_dispatch = t;
            self.event.t_ready = t;
        }
        barrier::sync_threads();
        let id = unsafe { slot.read_volatile() };
        barrier::sync_threads();
        self.begin_tile();
        if id < count {
            Some(grid.tile(id))
        } else {
            None
        }
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, tile: TileIdx, k_step: u32) -> bool {
        // Hot path: called before every K-step's A loads, by every thread. Everything else is
        // in the cold path, taken once per producer column tile that may need a wait.
        if k_step < self.next_wait_step {
            return true;
        }
        core::hint::cold_path();
        unsafe { self.wait_slow(tile, k_step, false) }
    }

    #[inline(always)]
    unsafe fn post(&mut self, tile: TileIdx) {
        if self.desc.debug_flags != 0 && unsafe { self.debug_before_post(tile, ids::thread_linear() == 0) } {
            return;
        }
        if let Some((sem, amount, sys)) = self.post_target(tile) {
            // A consumer on another GPU reads the tile and the semaphore: system scope.
            if sys {
                unsafe { sync::block_post_sys(sem, amount) };
            } else {
                unsafe { sync::block_post_gpu(sem, amount) };
            }
        }
        if self.desc.trace != 0 && ids::thread_linear() == 0 {
            let id = self.desc.grid.linear(tile);
            let mut e = self.event;
            e.stage = self.desc.stage;
            e.tile = id;
            e.sm = ids::sm_id();
            e.cta = ids::block_linear();
            if e.t_start == 0 {
                e.t_start = e.t_ready;
            }
            e.t_end = time::global_timer_ns();
            // A plain store (not volatile): the event stays in registers; the host reads it after the launch.
            unsafe { *(self.desc.trace as *mut TraceEvent).add(id as usize) = e };
        }
        self.event = TraceEvent::default();
    }
}

/// Stream mode for a warp-specialized kernel (GeMM path 2): the same protocol, per thread.
/// The launch is persistent (fewer blocks than tiles). The stage's work units (tiles times K
/// splits, a tile's splits consecutive in its order) are dealt in lanes, block `b` running the
/// units `b, b + gridDim.x, ..` (the plain kernels' static walk: `cusync_shared::lanes`, which
/// also says why a block that is not yet resident cannot stall the graph).
/// Waits are the producer thread's own (no barrier); the post is one consumer thread's, after
/// the kernel's named barrier over the consumers.
impl<const TRANSPOSED: bool> crate::stage::WsHooks for StreamStage<'_, TRANSPOSED> {
    const POSTS: bool = true;
    const DEPENDENT_B: bool = TRANSPOSED;
    /// The protocol's code (lane, scheduled waits, trace) sits in the producer thread, on the
    /// pipeline's critical path: under the plain kernels' 56 registers ptxas spilled in its K
    /// loop (`gemm_sm90_bf16_128x192_stream`: 80 / 276 bytes of spill stores / loads). Tiles up
    /// to 192 columns take the persistent megakernel's split (88 / 208), whose consumers hold
    /// 96 accumulators per thread at most; 128 x 256 tiles keep the plain split, which their
    /// consumers need.
    const REGS: (u32, u32) = (
        cusync_shared::gemm_sm90::WG_PERSISTENT_PRODUCER_REGS,
        cusync_shared::gemm_sm90::WG_PERSISTENT_CONSUMER_REGS,
    );
    const REGS_WIDE: (u32, u32) = (
        cusync_shared::gemm_sm90::WG_PRODUCER_REGS,
        cusync_shared::gemm_sm90::WG_CONSUMER_REGS,
    );

    /// Warp 2 reads each unit's semaphores ahead of the producer (`cusync_shared::lanes`), so
    /// the producer thread, on the pipeline's critical path, finds its waits met in shared
    /// memory instead of making one acquire round trip to L2 per four semaphores.
    const POLL_WARP: bool = true;

    /// Posts only with a consumer edge, a trace or fault injection: a last stage (the MLP's
    /// GeMM2) skips the consumers' per-tile barrier, as the plain kernel does.
    #[inline(always)]
    fn posts_now(&self) -> bool {
        self.desc.post.sems != 0 || self.desc.trace != 0 || self.desc.debug_flags != 0
    }

    /// The block's lane: its first unit is its block index. Traced, the block's entry time.
    #[inline(always)]
    unsafe fn at_entry(&mut self) {
        self.lane_next = Some(ids::ctaid_x());
        // The poll warp's hand-over, before the setup barrier that orders it before the
        // warp's first read: no slot holds a unit yet; the producer is at its first unit.
        let state = smem::to_shared_addr(poll_state());
        // SAFETY: the static buffer above; no other thread reads it before the barrier (the
        // entry time is the producer thread's own: it reads it back in `next_tile`).
        unsafe {
            smem::st_volatile_u64(state, lanes::pack_poll(lanes::POLL_PRODUCER_DONE, 0));
            smem::st_volatile_u64(state + 8, lanes::pack_poll(lanes::POLL_PRODUCER_DONE, 0));
            smem::st_volatile_u32(state + POLL_CURRENT, ids::ctaid_x());
            if self.desc.trace != 0 {
                smem::st_volatile_u64(state + POLL_ENTRY, time::global_timer_ns());
            }
        }
    }

    #[inline(always)]
    unsafe fn next_tile(
        &mut self,
        _p: &cusync_shared::gemm_sm90::TmaGemmParams,
        tiles_m: u32,
        tiles_n: u32,
        splits: u32,
    ) -> Option<crate::stage::WsTile> {
        let grid = self.desc.grid;
        let splits = splits.max(1);
        let units = grid.count() * splits;
        let t = self.trace_time();
        let n = self.lane_next.take()?;
        if n >= units {
            return None;
        }
        // Traced: the block's first unit was dispatched at entry (`POLL_ENTRY`).
        let t_dispatch = if self.desc.trace != 0 && self.unit == lanes::POLL_PRODUCER_DONE {
            // SAFETY: the entry-time word of the static buffer above, written in `at_entry`.
            unsafe { smem::ld_volatile_u64(smem::to_shared_addr(poll_state()) + POLL_ENTRY) }
        } else {
            t
        };
        self.lane_next = lanes::next_in_lane(n, ids::nctaid_x(), units);
        self.unit = n;
        // SAFETY: the current-unit word of the static buffer above.
        unsafe { smem::st_volatile_u32(smem::to_shared_addr(poll_state()) + POLL_CURRENT, n) };
        let tile = grid.tile(unsafe { self.tile_of_ticket(n / splits) });
        let (tm, tn) = if TRANSPOSED { (tile.y, tile.x) } else { (tile.x, tile.y) };
        if tm >= tiles_m || tn >= tiles_n {
            // The host matches the stage grid to the kernel's tiles; a mismatch is not computed.
            return None;
        }
        self.begin_tile();
        // SAFETY: the producer thread, for the unit it just took.
        unsafe { self.probe_first_wait(tile) };
        Some(crate::stage::WsTile {
            tm,
            tn,
            id: grid.linear(tile),
            split: n % splits,
            stage: 0,
            _pad: 0,
            t_dispatch,
            t_ready: t,
        })
    }

    unsafe fn serve_polls(&mut self, p: &cusync_shared::gemm_sm90::TmaGemmParams, lane: u32) {
        let splits = if p.split_k > 1 { p.split_k } else { 1 };
        // SAFETY: forwarded (every lane of warp 2).
        unsafe { self.poll_lane(splits, lane) };
    }

    #[inline(always)]
    unsafe fn producer_done(&mut self) {
        // SAFETY: the current-unit word of the static buffer above.
        unsafe {
            smem::st_volatile_u32(
                smem::to_shared_addr(poll_state()) + POLL_CURRENT,
                lanes::POLL_PRODUCER_DONE,
            )
        };
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, tile: &mut crate::stage::WsTile, k_step: u32) -> bool {
        if k_step < self.next_wait_step {
            return true;
        }
        core::hint::cold_path();
        let idx = Self::stage_tile(tile);
        let ok = unsafe { self.wait_slow(idx, k_step, true) };
        // Traced: when the tile's first waits returned (read here, not kept in the hooks: the
        // producer thread keeps no trace state in its registers between tiles).
        if k_step == 0 && self.desc.trace != 0 {
            tile.t_ready = time::global_timer_ns();
        }
        ok
    }

    #[inline(always)]
    unsafe fn post(&mut self, tile: &crate::stage::WsTile, t_start: u64) {
        let idx = Self::stage_tile(tile);
        if self.desc.debug_flags != 0 && unsafe { self.debug_before_post(idx, true) } {
            return;
        }
        if let Some((sem, amount, sys)) = self.post_target(idx) {
            if sys {
                unsafe { sync::thread_post_sys(sem, amount) };
            } else {
                unsafe { sync::thread_post_gpu(sem, amount) };
            }
        }
        if self.desc.trace != 0 {
            let e = TraceEvent {
                stage: self.desc.stage,
                tile: tile.id,
                sm: ids::sm_id(),
                cta: ids::block_linear(),
                t_dispatch: tile.t_dispatch,
                t_ready: tile.t_ready,
                t_start,
                t_end: time::global_timer_ns(),
            };
            unsafe { *(self.desc.trace as *mut TraceEvent).add(tile.id as usize) = e };
        }
    }
}

/// Stream mode for the skinny GeMM (`crate::kernels::gemm::skinny`): a block's unit of work is
/// a range of the weight, and the stage's tiles are the output's column blocks (one row tile:
/// `M <= 16`), posted by whichever block completes one.
///
/// The range is the block's `blockIdx.x`, not a ticket from the stage's counter: a launch is
/// exactly the blocks that fit at once (one wave of equal ranges), no block of a stage waits on
/// its own stage, and a consumer's blocks reach the SMs only after the producer's (the wait
/// kernel, or both launches fitting one wave), so the order blocks take ranges in cannot stall
/// anything. The ticket's round trip would delay every block's first load by ~1 µs, 2-3% of a
/// 45 µs GPT-3 MLP stage at B = 1 (docs/perf-notes.md, session 13).
///
/// A segment's wait covers the producer column tiles of A's K prefix `[0, k_end)` (every
/// policy's waits for a tile's steps `0..=last`, the same set a whole tile's main loop makes
/// up to that step), polled by the block's threads in parallel (one acquire round trip for up
/// to 256 semaphores), then one `bar.red.and`. The built-in policies' waits depend on the step,
/// never on the consumer's column tile (`cusync_shared::skinny::waits_ignore_consumer_column`),
/// so a later segment waits only on the columns past the ones this block already waited for.
impl SkinnyHooks for StreamStage<'_> {
    const A_IN_FLIGHT: bool = true;

    #[inline(always)]
    unsafe fn range(&mut self, ctas: u32) -> Option<u32> {
        if self.desc.trace != 0 && ids::thread_linear() == 0 {
            let t = time::global_timer_ns();
            self.event.t_dispatch = t;
            self.event.t_ready = t;
        }
        // `next_wait_step` counts the producer column tiles this block has waited for.
        self.next_wait_step = 0;
        let cta = ids::ctaid_x();
        (cta < ctas).then_some(cta)
    }

    #[inline(always)]
    unsafe fn wait_k(&mut self, col_block: u32, _k_begin: u32, k_end: u32) -> bool {
        let edge = &self.desc.wait;
        if edge.sems == 0 || k_end == 0 || edge.producer.y == 0 {
            return true;
        }
        let tile_n = edge.producer_tile_n.max(1);
        let end = ((k_end - 1) / tile_n + 1).min(edge.producer.y);
        let begin = self.next_wait_step;
        if end <= begin {
            return true;
        }
        core::hint::cold_path();
        self.next_wait_step = end;
        let tile = TileIdx::new(0, col_block, 0);
        let policy = PolicyKind::decode(edge.policy).unwrap_or(PolicyKind::NoSync);
        let sys = Scope::decode(edge.scope).is_some_and(Scope::is_sys);
        let site = self.site(tile);
        let threads = ids::ntid_x();
        let mut ok = true;
        let mut col = begin + ids::thread_linear();
        while ok && col < end {
            let step = Step {
                row: 0,
                k: col,
                first_in_row: col == 0,
            };
            if let Some(w) = policy.wait(edge.producer, edge.consumer, tile, step) {
                let sem = (edge.sems as *const u32).wrapping_add(w.semaphore as usize);
                let target = w.target(self.desc.epoch);
                // SAFETY: the semaphore lies in the edge's array (the policy's index < its
                // `semaphore_count`, which the host allocated).
                ok = unsafe { sync::thread_wait(sem, target, &site, sys, ErrorCode::SemaphoreTimeout) };
            }
            col += threads;
        }
        // Every thread's acquire happens before every thread's A loads after the barrier.
        let all = barrier::sync_threads_and(ok);
        if self.desc.trace != 0 && ids::thread_linear() == 0 {
            self.event.t_ready = time::global_timer_ns();
        }
        all
    }

    #[inline(always)]
    unsafe fn post_col_block(&mut self, col_block: u32, t_start: u64) {
        let tile = TileIdx::new(0, col_block, 0);
        if self.desc.debug_flags != 0 && unsafe { self.debug_before_post(tile, ids::thread_linear() == 0) } {
            return;
        }
        if let Some((sem, amount, sys)) = self.post_target(tile) {
            if sys {
                unsafe { sync::block_post_sys(sem, amount) };
            } else {
                unsafe { sync::block_post_gpu(sem, amount) };
            }
        }
        if self.desc.trace != 0 && ids::thread_linear() == 0 {
            let id = self.desc.grid.linear(tile);
            let e = TraceEvent {
                stage: self.desc.stage,
                tile: id,
                sm: ids::sm_id(),
                cta: ids::block_linear(),
                t_dispatch: self.event.t_dispatch,
                t_ready: self.event.t_ready,
                t_start,
                t_end: time::global_timer_ns(),
            };
            // SAFETY: the host's trace buffer holds one event per tile of the stage's grid.
            unsafe { *(self.desc.trace as *mut TraceEvent).add(id as usize) = e };
        }
    }

    #[inline(always)]
    fn traced(&self) -> bool {
        self.desc.trace != 0
    }
}
