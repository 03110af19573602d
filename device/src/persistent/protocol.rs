//! What the megakernel asks of its protocol: a tile to run next (thread 0) and the post of a
//! finished tile (warp 0). [`QueueProtocol`] is the CTA-pipelining protocol (workqueues,
//! scoreboards, dependency arrays); [`CounterProtocol`] is the overhead baseline with no
//! protocol at all (one ticket counter, nothing posted).

use super::control::{Ctl, Slot, ABORT, DONE, NONE, TICKET};
use super::memory::GpuMemory;
use crate::ptx::{atomics, barrier, ids, time};
use crate::sync::{self, WaitSite};
use cusync_shared::layout::{ErrorCode, ErrorSlot, TraceEvent, DEBUG_DELAY, DEBUG_SKIP_POST};
use cusync_shared::persistent::{
    counter_ticket, counter_window, error_code, poll_queues, poll_queues_committing, twin_tile, wait_queues,
    PersistentDesc, PersistentStage, Poll, StageError, StageQueue, WaitError, FLAG_SKIP_POST, FLAG_TRACE,
};
use cusync_shared::protocol::{
    post_producer_tile_lanes, try_slot, wait_ticket, LaunchWindow, PersistentEdge, ProtocolMemory,
};

/// The stage descriptor at index `i`.
///
/// # Safety
/// `i < desc.num_stages` and `desc.stages` holds the launch's descriptors.
#[inline(always)]
pub unsafe fn stage(desc: &PersistentDesc, i: u32) -> &PersistentStage {
    // SAFETY: the caller's contract; the descriptors are read-only during the launch.
    unsafe { &*(desc.stages as *const PersistentStage).add(i as usize) }
}

/// Records an error in the launch's error slot (the first reporter wins; see `sync::report`).
///
/// # Safety
/// `desc.error` is 0 or a valid [`ErrorSlot`].
#[inline(always)]
pub unsafe fn report(
    desc: &PersistentDesc,
    stage: u32,
    tile: u32,
    code: ErrorCode,
    addr: u64,
    seen: u32,
    expected: u32,
) {
    let site = WaitSite {
        stage,
        tile,
        error: desc.error as *mut ErrorSlot,
        timeout_ns: desc.timeout_ns,
    };
    // SAFETY: forwarded contract.
    unsafe { sync::report(&site, code, addr, seen, expected) };
}

/// A stage error reported with the user's stage id (`tile` when known, else `u32::MAX`).
///
/// # Safety
/// As for [`report`], and `e.stage < desc.num_stages`.
#[inline(always)]
unsafe fn report_stage_error(desc: &PersistentDesc, e: StageError, tile: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        let id = stage(desc, e.stage).stage;
        report(
            desc,
            id,
            tile,
            error_code(&e.error),
            e.error.addr(),
            e.error.seen(),
            e.error.expected(),
        );
    }
}

/// `%globaltimer` when tracing, else 0 (the untraced kernel reads no clock).
#[inline(always)]
pub fn stamp(desc: &PersistentDesc) -> u64 {
    if desc.flags & FLAG_TRACE != 0 {
        time::global_timer_ns()
    } else {
        0
    }
}

/// A megakernel's source of tiles and its post. Implementations are views of a launch
/// descriptor (the block's shared-memory copy), built where they are used.
pub trait Protocol: Sized {
    /// Whether finished tiles are posted ([`Protocol::post`] is called at all). The
    /// no-protocol baseline sets it `false` and compiles the epilogue out.
    const POSTS: bool;

    /// The protocol of the launch `desc` describes.
    ///
    /// # Safety
    /// `desc` points to the launch's descriptor (written by the host for this launch: every
    /// address in it and in the stage and edge descriptors is valid device memory of the right
    /// layout) and stays valid while the protocol is used.
    unsafe fn at(desc: *const PersistentDesc) -> Self;

    /// Thread 0, at kernel start: resets the per-launch scheduler state in `ctl`.
    ///
    /// # Safety
    /// Thread 0 only, before any other call.
    unsafe fn begin(&self, ctl: &Ctl);

    /// The scheduling thread: the next tile if one is ready now, else [`NONE`]; [`DONE`] when the launch's
    /// tiles are all handed out; [`ABORT`] after reporting an error.
    ///
    /// # Safety
    /// The block's scheduling thread only (thread 0 of the path-1 megakernel, lane 0 of warp 2
    /// of the path-2 one).
    unsafe fn poll(&self, ctl: &Ctl) -> Slot;

    /// The scheduling thread: [`Protocol::poll`], except that a stage whose upstream stages are all
    /// finished is popped with one fetch-add, pushed or not
    /// (`cusync_shared::persistent::poll_queues_committing`): the answer may then be a
    /// committed ticket ([`Slot::ticket`]), which the caller must [`Protocol::resolve`]. The
    /// default never commits.
    ///
    /// # Safety
    /// The block's scheduling thread only (thread 0 of the path-1 megakernel, lane 0 of warp 2
    /// of the path-2 one).
    #[inline(always)]
    unsafe fn poll_committing(&self, ctl: &Ctl) -> Slot {
        // SAFETY: forwarded contract.
        unsafe { self.poll(ctl) }
    }

    /// The scheduling thread: the tile of committed ticket `ticket` if its slot is published, else `ticket`
    /// again; with `wait`, waits for it (bounded by the launch's timeout). [`ABORT`] after
    /// reporting an error or a timeout. Anything but a ticket is returned as it is.
    ///
    /// # Safety
    /// The block's scheduling thread only; `ticket` came from [`Protocol::poll_committing`]
    /// this launch. With `wait`, only where the wait holds up no unfinished work of the block
    /// that other blocks await (between tiles, every load of the tile before issued; or in the
    /// path-2 scheduler warp, which the block's current tile does not need): the ticket's push
    /// may need it otherwise.
    #[inline(always)]
    unsafe fn resolve(&self, ticket: Slot, _wait: bool) -> Slot {
        ticket
    }

    /// The scheduling thread: waits (bounded by the launch's timeout) for the next tile; [`DONE`] or
    /// [`ABORT`] (after reporting a timeout or error, or when another block reported one).
    ///
    /// # Safety
    /// The block's scheduling thread only (thread 0 of the path-1 megakernel, lane 0 of warp 2
    /// of the path-2 one).
    unsafe fn wait(&self, ctl: &Ctl) -> Slot;

    /// Warp 0, every lane: posts finished tile `item` (its stores are ordered before this call
    /// by a block barrier). Returns `false` in the lanes that failed (and reported).
    ///
    /// # Safety
    /// All 32 lanes of warp 0 call it, after the barrier that follows the tile's stores.
    unsafe fn post(&self, item: Slot, lane: u32) -> bool;
}

/// The CTA-pipelining protocol over the launch's workqueues and scoreboards (GPU scope).
pub struct QueueProtocol {
    desc: *const PersistentDesc,
    mem: GpuMemory,
}

impl QueueProtocol {
    #[inline(always)]
    fn d(&self) -> &PersistentDesc {
        // SAFETY: `at`'s contract.
        unsafe { &*self.desc }
    }

    #[inline(always)]
    fn queue_of(&self, i: u32) -> StageQueue {
        // SAFETY: the scheduler asks only for indices below `num_stages`.
        let st = unsafe { stage(self.d(), i) };
        StageQueue {
            queue: st.queue,
            tiles: st.grid.count(),
            upstream: st.upstream,
        }
    }

    #[inline(always)]
    fn tile(&self, stage: u32, tile: u32) -> Slot {
        Slot::tile(stage, tile, stamp(self.d()))
    }

    /// A polling round's answer as a slot (an error reported first).
    #[inline(always)]
    fn slot_of(&self, got: Result<Poll, StageError>) -> Slot {
        match got {
            Ok(Poll::Tile { stage, tile }) => self.tile(stage, tile),
            Ok(Poll::Ticket { stage, position }) => Slot::ticket(stage, position),
            Ok(Poll::Empty) => Slot::mark(NONE),
            Ok(Poll::Done) => Slot::mark(DONE),
            Err(e) => {
                // SAFETY: `e.stage` is a stage index; `desc.error` is the launch's slot.
                unsafe { report_stage_error(self.d(), e, u32::MAX) };
                Slot::mark(ABORT)
            }
        }
    }
}

impl Protocol for QueueProtocol {
    const POSTS: bool = true;

    #[inline(always)]
    unsafe fn at(desc: *const PersistentDesc) -> Self {
        Self {
            desc,
            // SAFETY: forwarded contract: the protocol's addresses come from `desc`.
            mem: unsafe { GpuMemory::new() },
        }
    }

    #[inline(always)]
    unsafe fn begin(&self, ctl: &Ctl) {
        ctl.set_finished(0);
    }

    #[inline(always)]
    unsafe fn poll(&self, ctl: &Ctl) -> Slot {
        let d = self.d();
        let mut finished = ctl.finished();
        let got = poll_queues(&self.mem, d.num_stages, d.epoch, d.timeout_ns, &mut finished, |i| {
            self.queue_of(i)
        });
        ctl.set_finished(finished);
        self.slot_of(got)
    }

    // Inlined, as `resolve`, into the path-2 scheduler warp (their only caller). They used to
    // run out of line in the producer thread, whose K loop then kept its state in local memory
    // (136 / 256 bytes of spills in the 128 x 256 megakernel); called out of line from the
    // scheduler warp instead, ptxas 13.0 failed the kernel's register allocation (C7600 at
    // 208 registers), so nothing in the scheduler warp is a call.
    #[inline(always)]
    unsafe fn poll_committing(&self, ctl: &Ctl) -> Slot {
        let d = self.d();
        let mut finished = ctl.finished();
        let got = poll_queues_committing(&self.mem, d.num_stages, d.epoch, d.timeout_ns, &mut finished, |i| {
            self.queue_of(i)
        });
        ctl.set_finished(finished);
        self.slot_of(got)
    }

    #[inline(always)]
    unsafe fn resolve(&self, ticket: Slot, wait: bool) -> Slot {
        if !ticket.is_ticket() {
            return ticket;
        }
        let d = self.d();
        let stage = ticket.stage & !TICKET;
        let q = self.queue_of(stage);
        let window = LaunchWindow::new(d.epoch, q.tiles);
        let got = if wait {
            wait_ticket(&self.mem, &q.queue, window, ticket.tile, d.timeout_ns).map(Some)
        } else {
            try_slot(&self.mem, &q.queue, window, ticket.tile)
        };
        match got {
            Ok(Some(tile)) => self.tile(stage, tile),
            Ok(None) => ticket,
            Err(error) => {
                // SAFETY: `stage` is a stage index (the ticket's); `desc.error` is the launch's slot.
                unsafe { report_stage_error(d, StageError { stage, error }, u32::MAX) };
                Slot::mark(ABORT)
            }
        }
    }

    #[inline(always)]
    unsafe fn wait(&self, ctl: &Ctl) -> Slot {
        let d = self.d();
        // `ErrorSlot::code` is its first word: nonzero once any block reported.
        const _: () = assert!(core::mem::offset_of!(ErrorSlot, code) == 0);
        let code = d.error as *const u32;
        // SAFETY (closure): `desc.error` is the launch's error slot when not 0.
        let aborted = || !code.is_null() && unsafe { atomics::ld_relaxed_gpu(code) } != 0;
        let mut finished = ctl.finished();
        let got = wait_queues(
            &self.mem,
            d.num_stages,
            d.epoch,
            d.timeout_ns,
            &mut finished,
            |i| self.queue_of(i),
            aborted,
        );
        ctl.set_finished(finished);
        match got {
            Ok(Poll::Tile { stage, tile }) => self.tile(stage, tile),
            Ok(Poll::Done | Poll::Empty | Poll::Ticket { .. }) => Slot::mark(DONE),
            Err(WaitError::Aborted) => Slot::mark(ABORT),
            Err(WaitError::Failed(e)) => {
                // SAFETY: as in `poll`.
                unsafe { report_stage_error(d, e, u32::MAX) };
                Slot::mark(ABORT)
            }
        }
    }

    #[inline(always)]
    unsafe fn post(&self, item: Slot, lane: u32) -> bool {
        let d = self.d();
        // SAFETY: `item` is a tile this block ran: its stage index is valid.
        let st = unsafe { stage(d, item.stage) };
        // SAFETY: all 32 lanes of warp 0 (this function's contract).
        if st.debug_flags != 0 && unsafe { debug_before_post(st, d.epoch, item.tile, lane) } {
            return true; // the injected fault: this tile is never posted
        }
        let mut ok = true;
        if d.flags & FLAG_SKIP_POST == 0 {
            let edges = d.edges as *const PersistentEdge;
            let mut e = st.first_edge;
            let end = st.first_edge + st.num_edges;
            while e < end {
                // SAFETY: the host groups each stage's outgoing edges at `first_edge..`.
                let edge = unsafe { *edges.add(e as usize) };
                if let Err(err) = post_producer_tile_lanes(&self.mem, &edge, item.tile, d.epoch, lane, 32) {
                    // SAFETY: `desc.error` is the launch's slot.
                    unsafe {
                        report(
                            d,
                            st.stage,
                            item.tile,
                            error_code(&err),
                            err.addr(),
                            err.seen(),
                            err.expected(),
                        )
                    };
                    ok = false;
                    break;
                }
                e += 1;
            }
        }
        if ok && lane == 0 && d.done != 0 {
            self.mem.red_release_add(d.done, 1);
        }
        ok
    }
}

/// Test-only fault and delay injection before a tile's post (`PersistentStage::debug_flags`):
/// with `DEBUG_DELAY`, lane 0 waits a pseudo-random 0..`debug_param` ns (a hash of tile and
/// epoch) while the other lanes wait at the warp barrier; returns `true` when the tile is the
/// one `DEBUG_SKIP_POST` names (its post, and its tiles-done count, are skipped).
///
/// # Safety
/// All 32 lanes of warp 0 call it.
#[cold]
#[inline(never)]
unsafe fn debug_before_post(st: &PersistentStage, epoch: u32, tile: u32, lane: u32) -> bool {
    if st.debug_flags & DEBUG_DELAY != 0 && st.debug_param > 0 {
        if lane == 0 {
            let h =
                (tile ^ epoch.wrapping_mul(0x9e37_79b9) ^ st.stage.wrapping_mul(0x27d4_eb2f)).wrapping_mul(0x85eb_ca6b);
            let until = time::global_timer_ns() + (h % st.debug_param) as u64;
            while time::global_timer_ns() < until {
                time::nanosleep(500);
            }
        }
        barrier::sync_warp();
    }
    st.debug_flags & DEBUG_SKIP_POST != 0 && tile == st.debug_param
}

/// Writes the trace event of a posted tile that started at `t_start` (one lane of the posting
/// warp, tracing on).
///
/// # Safety
/// `item` is a tile of this launch.
#[inline(always)]
pub unsafe fn trace_posted(desc: &PersistentDesc, item: Slot, t_start: u64) {
    // SAFETY: `item.stage` is a valid index; the trace buffer holds one event per tile.
    unsafe {
        let st = stage(desc, item.stage);
        if st.trace == 0 {
            return;
        }
        let e = TraceEvent {
            stage: st.stage,
            tile: item.tile,
            sm: ids::sm_id(),
            cta: ids::block_linear(),
            t_dispatch: item.t_dispatch,
            t_ready: item.t_dispatch,
            t_start,
            t_end: time::global_timer_ns(),
        };
        // A plain store: the host reads the buffer after the launch.
        *(st.trace as *mut TraceEvent).add(item.tile as usize) = e;
    }
}

/// The no-protocol baseline: thread 0 takes tickets from one counter with `atom.add` (launch
/// `e`'s window per `counter_window`, the grid size read from `%nctaid`), maps them to tiles
/// (last stage first, each stage in the plain GeMM kernel's raster order: `twin_tile`) and
/// never waits, posts or traces. Only for measuring the
/// protocol's cost: it does not respect dependencies.
pub struct CounterProtocol {
    desc: *const PersistentDesc,
}

impl Protocol for CounterProtocol {
    const POSTS: bool = false;

    #[inline(always)]
    unsafe fn at(desc: *const PersistentDesc) -> Self {
        Self { desc }
    }

    #[inline(always)]
    unsafe fn begin(&self, _ctl: &Ctl) {}

    #[inline(always)]
    unsafe fn poll(&self, _ctl: &Ctl) -> Slot {
        // SAFETY: `at`'s contract.
        let d = unsafe { &*self.desc };
        // SAFETY: `desc.counter` is the launch's ticket counter.
        let ticket = unsafe { atomics::atom_add_relaxed_gpu(d.counter as *mut u32, 1) };
        let window = counter_window(d.epoch, d.total_tiles, ids::nctaid_x());
        // SAFETY: indices below `num_stages`.
        match counter_ticket(ticket, window, d.num_stages, |i| unsafe { stage(d, i) }.grid.count()) {
            // SAFETY: `s < num_stages` (counter_ticket's contract).
            Some((s, n)) => Slot::tile(s, twin_tile(n, unsafe { stage(d, s) }.grid), 0),
            None => Slot::mark(DONE),
        }
    }

    #[inline(always)]
    unsafe fn wait(&self, ctl: &Ctl) -> Slot {
        // SAFETY: forwarded contract.
        unsafe { self.poll(ctl) }
    }

    #[inline(always)]
    unsafe fn post(&self, _item: Slot, _lane: u32) -> bool {
        true
    }
}
