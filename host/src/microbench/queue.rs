//! Persistent-mode protocol microbenchmarks (issue 7): workqueue push and pop under
//! contention, and the scoreboard decrement through a dependency array. Both kernels
//! (`bench_queue`, `bench_scoreboard` in device/src/kernels/microbench.rs) run the shared
//! protocol code the megakernel runs, and both results carry the correctness facts the GPU
//! tests assert (every item popped exactly once; every consumer tile pushed exactly once, its
//! counter at its target) next to the times.

use std::mem::{offset_of, size_of};

use cusync_shared::layout::{DevAddr, WorkQueueCounters, WorkQueueSlot};
use cusync_shared::policy::{Dependency, PolicyKind};
use cusync_shared::protocol::{prefill_slot, LaunchWindow};
use cusync_shared::Grid;

use super::{launch_err, warp_blocks, Stats};
use crate::cudarc::driver::PushKernelArg;
use crate::error::{Error, Result};
use crate::plan::{PlanSpec, ProtocolImage};
use crate::runtime::{Context, ErrorSlotBuffer};

/// Items each producer block pushes per launch of the workqueue benchmark.
pub const QUEUE_ITEMS_PER_PRODUCER: u32 = 512;

/// How consumers run against producers in [`queue_bench`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueMode {
    /// Consumers start popping once every push is published: a pop's time is the popper's own
    /// cost under contention with the other poppers.
    Phased,
    /// Consumers pop while producers push: a pop's time includes any wait for its push.
    Racing,
}

/// What one launch of the workqueue benchmark measured and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueBench {
    /// Producer blocks.
    pub producers: u32,
    /// Consumer blocks.
    pub consumers: u32,
    /// Items pushed in all (`producers * per_producer`).
    pub items: u32,
    /// Median over producer blocks of ns per push.
    pub push_ns: f64,
    /// Median over consumer blocks that popped anything of ns per pop.
    pub pop_ns: f64,
    /// Pushes the producers reported (sum of their counts).
    pub pushed: u32,
    /// Pops the device counted (each consumer adds its count).
    pub popped: u32,
    /// Pops the consumer blocks reported one by one (sum of their counts).
    pub popped_by_blocks: u32,
    /// Distinct items popped, counted on the device by the last consumer.
    pub distinct: u32,
    /// The device's verdict: `true` when `popped == distinct == items`.
    pub device_verdict: bool,
    /// The queue's `head` and `tail` after the launch: `tail == items` when every item was
    /// pushed; `head` from `items` to `items + consumers` (once every item is pushed a pop is
    /// a fetch-add, and each consumer's last one, which finds the queue finished, lands past).
    pub head: u32,
    /// See `head`.
    pub tail: u32,
}

impl QueueBench {
    /// Every pushed item popped exactly once, by the device's check and the host's counts.
    pub fn exactly_once(&self) -> bool {
        self.device_verdict
            && self.pushed == self.items
            && self.popped == self.items
            && self.popped_by_blocks == self.items
            && self.distinct == self.items
            && self.head.wrapping_sub(self.items) <= self.consumers
            && self.tail == self.items
    }

    /// `Ok` when [`QueueBench::exactly_once`], else [`Error::Verification`] with the counts.
    pub fn verify(&self) -> Result<()> {
        if self.exactly_once() {
            return Ok(());
        }
        Err(Error::Verification(format!(
            "workqueue benchmark ({} producers, {} consumers): {} items, {} pushed, {} popped ({} by the blocks' \
             counts), {} distinct, head {}, tail {}, device verdict {}",
            self.producers,
            self.consumers,
            self.items,
            self.pushed,
            self.popped,
            self.popped_by_blocks,
            self.distinct,
            self.head,
            self.tail,
            if self.device_verdict { "ok" } else { "failed" }
        )))
    }
}

/// Refuses a launch of `blocks` one-warp blocks of `kernel` that could not all be resident
/// (their spin-waits would wait for blocks that cannot start until they exit).
fn ensure_resident(cx: &Context, kernel: &str, blocks: u32) -> Result<()> {
    let resident = cx.occupancy(kernel, 32, 0)? * cx.info().sm_count;
    if blocks > resident {
        return Err(Error::InvalidArgument(format!(
            "{blocks} blocks of `{kernel}` asked for, but only {resident} can be resident"
        )));
    }
    Ok(())
}

/// Median of `total_ns[i] / count[i]` over the entries with a nonzero count (NaN if none).
fn median_per_op_of(total_ns: &[u64], count: &[u32]) -> f64 {
    let mut v: Vec<f64> = total_ns
        .iter()
        .zip(count)
        .filter(|(_, &n)| n > 0)
        .map(|(&t, &n)| t as f64 / n as f64)
        .collect();
    if v.is_empty() {
        return f64::NAN;
    }
    Stats::of(&mut v).median
}

/// One launch of the workqueue benchmark: `producers` blocks push
/// `QUEUE_ITEMS_PER_PRODUCER` items each through `cusync_shared::protocol::push`, `consumers`
/// blocks pop them with the megakernel scheduler's `wait_queues`, in `mode`. Returns the
/// times and the exactly-once facts (call [`QueueBench::verify`] to turn a violation into an
/// error); a device error (timeout, protocol violation) is an `Err`.
pub fn queue_bench(cx: &Context, producers: u32, consumers: u32, mode: QueueMode) -> Result<QueueBench> {
    if producers == 0 || consumers == 0 {
        return Err(Error::InvalidArgument(
            "the workqueue benchmark needs at least one producer and one consumer block".into(),
        ));
    }
    let blocks = producers + consumers;
    ensure_resident(cx, "bench_queue", blocks)?;
    let per = QUEUE_ITEMS_PER_PRODUCER;
    let items = producers * per;
    let counters = cx.alloc_zeros::<u32>(size_of::<WorkQueueCounters>() / 4)?;
    let slots = cx.alloc_zeros::<u32>(items as usize * size_of::<WorkQueueSlot>() / 4)?;
    let mut seen = cx.alloc_zeros::<u32>(items as usize)?;
    // `done`, `finished` and `check` on separate 128-byte lines.
    let words = cx.alloc_zeros::<u32>(3 * 32)?;
    let mut out = cx.alloc_zeros::<u64>(blocks as usize)?;
    let mut ops = cx.alloc_zeros::<u32>(blocks as usize)?;
    let err = ErrorSlotBuffer::new(cx)?;
    let f = cx.function("bench_queue")?;
    let s = cx.new_stream()?;
    let (counters_addr, slots_addr) = (counters.addr(), slots.addr());
    let (done, finished, check) = (words.addr_of(0), words.addr_of(32), words.addr_of(64));
    let phased = u32::from(mode == QueueMode::Phased);
    let (err_addr, timeout) = (err.addr(), 2_000_000_000u64);
    let mut b = s.raw().launch_builder(&f);
    b.arg(&counters_addr)
        .arg(&slots_addr)
        .arg(&items)
        .arg(&producers)
        .arg(&per)
        .arg(&phased)
        .arg(seen.slice_mut())
        .arg(&done)
        .arg(&finished)
        .arg(&check)
        .arg(out.slice_mut())
        .arg(ops.slice_mut())
        .arg(&err_addr)
        .arg(&timeout);
    // SAFETY: argument types and order match `bench_queue`; the queue holds `items` slots,
    // `seen` `items` words, `out`/`ops` one entry per block, `words` the three counters on
    // their own lines; every block is resident (checked above), so no wait waits on a block
    // that cannot start.
    unsafe { b.launch(warp_blocks(blocks)) }.map_err(launch_err("launching bench_queue"))?;
    s.synchronize()?;
    err.check()?;
    let (w, c) = (words.download()?, counters.download()?);
    let (t, n) = (out.download()?, ops.download()?);
    let p = producers as usize;
    Ok(QueueBench {
        producers,
        consumers,
        items,
        push_ns: median_per_op_of(&t[..p], &n[..p]),
        pop_ns: median_per_op_of(&t[p..], &n[p..]),
        pushed: n[..p].iter().sum(),
        popped: w[64],
        distinct: w[65],
        popped_by_blocks: n[p..].iter().sum(),
        device_verdict: w[66] == 1,
        head: c[offset_of!(WorkQueueCounters, head) / 4],
        tail: c[offset_of!(WorkQueueCounters, tail) / 4],
    })
}

/// The dependency-array shape of [`scoreboard_bench`]; both are 64 row tiles deep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fan {
    /// `64 x 96 -> 64 x 96`, each consumer tile reading one producer tile (a strided
    /// dependency of one slice): one arrival per post, and every arrival completes its
    /// counter and pushes.
    OneToOne,
    /// `64 x 48 -> 64 x 96` under RowSync (the GPT-3 MLP's GeMM1 -> GeMM2 at 128 x 128 tiles
    /// and batch 8192): each post arrives at its row's 96 consumer tiles, each of which needs
    /// 48 arrivals; the 48th pushes.
    Row,
}

impl Fan {
    /// Producer and consumer grids.
    pub fn grids(self) -> (Grid, Grid) {
        match self {
            Fan::OneToOne => (Grid::new(64, 96, 1), Grid::new(64, 96, 1)),
            Fan::Row => (Grid::new(64, 48, 1), Grid::new(64, 96, 1)),
        }
    }

    /// The planner's input for this shape.
    pub fn plan_spec(self) -> PlanSpec {
        let (p, c) = self.grids();
        let mut spec = PlanSpec::new();
        let (a, b) = (spec.stage("producer", p), spec.stage("consumer", c));
        match self {
            Fan::OneToOne => spec.edge(a, b, Dependency::Strided { stride: p.y }, PolicyKind::TileSync),
            Fan::Row => spec.edge(a, b, Dependency::GemmRow, PolicyKind::RowSync),
        };
        spec
    }

    /// A short description for tables.
    pub fn name(self) -> &'static str {
        match self {
            Fan::OneToOne => "1:1 CSR 64x96->64x96 (1 arrival)",
            Fan::Row => "RowSync CSR 64x48->64x96 (96 arrivals)",
        }
    }
}

/// What one launch of the scoreboard benchmark measured and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreboardBench {
    /// The shape.
    pub fan: Fan,
    /// Blocks that posted.
    pub blocks: u32,
    /// Median over blocks that posted of ns per producer-tile post (fence, arrivals, pushes).
    pub post_ns: f64,
    /// Producer tiles (each posted once).
    pub producer_tiles: u32,
    /// Posts the blocks reported.
    pub posts: u32,
    /// Arrivals (CSR entries) over all posts.
    pub arrivals: u32,
    /// Consumer tiles.
    pub consumer_tiles: u32,
    /// Pushes the device reported (the arrivals that completed a counter).
    pub pushed: u32,
    /// The consumer queue's `tail` after the launch.
    pub tail: u32,
    /// Consumer tiles found in the queue's slots exactly once, each slot published for its
    /// position (`seq`).
    pub queued_once: u32,
    /// Scoreboard counters at their target (`needed`) after the launch.
    pub counters_at_target: u32,
}

impl ScoreboardBench {
    /// Every producer tile posted once and every consumer tile pushed exactly once, with its
    /// counter at its target.
    pub fn exactly_once(&self) -> bool {
        let n = self.consumer_tiles;
        self.posts == self.producer_tiles
            && self.pushed == n
            && self.tail == n
            && self.queued_once == n
            && self.counters_at_target == n
    }

    /// `Ok` when [`ScoreboardBench::exactly_once`], else [`Error::Verification`].
    pub fn verify(&self) -> Result<()> {
        if self.exactly_once() {
            return Ok(());
        }
        Err(Error::Verification(format!(
            "scoreboard benchmark ({}, {} blocks): {} of {} producer tiles posted; {} consumer tiles, {} pushed, \
             tail {}, {} queued exactly once, {} counters at target",
            self.fan.name(),
            self.blocks,
            self.posts,
            self.producer_tiles,
            self.consumer_tiles,
            self.pushed,
            self.tail,
            self.queued_once,
            self.counters_at_target
        )))
    }
}

/// One launch of the scoreboard benchmark: the planner lays out `fan`'s dependency array,
/// scoreboard targets and consumer queue (`ProtocolImage`, as a persistent graph would), then
/// `blocks` one-warp blocks post every producer tile once through
/// `cusync_shared::protocol::post_producer_tile_lanes`. Returns ns per post and the facts the
/// GPU test asserts (read back from the device's protocol state).
pub fn scoreboard_bench(cx: &Context, fan: Fan, blocks: u32) -> Result<ScoreboardBench> {
    if blocks == 0 {
        return Err(Error::InvalidArgument(
            "the scoreboard benchmark needs at least one block".into(),
        ));
    }
    let plan = fan
        .plan_spec()
        .plan()
        .map_err(|e| Error::InvalidArgument(format!("scoreboard benchmark plan: {e}")))?;
    let words = ProtocolImage::new(&plan, 0).words.len();
    let mut image_buf = cx.alloc_zeros::<u32>(words)?;
    let image = ProtocolImage::new(&plan, image_buf.addr());
    image_buf.upload(&image.words)?;
    let edge = image.edges[0];
    let edge_buf = cx.upload(bytemuck::cast_slice::<_, u32>(std::slice::from_ref(&edge)))?;
    let mut pushed = cx.alloc_zeros::<u32>(1)?;
    let mut out = cx.alloc_zeros::<u64>(blocks as usize)?;
    let mut ops = cx.alloc_zeros::<u32>(blocks as usize)?;
    let err = ErrorSlotBuffer::new(cx)?;
    let f = cx.function("bench_scoreboard")?;
    let s = cx.new_stream()?;
    let (edge_addr, epoch, err_addr) = (edge_buf.addr(), 0u32, err.addr());
    let mut b = s.raw().launch_builder(&f);
    b.arg(&edge_addr)
        .arg(&epoch)
        .arg(pushed.slice_mut())
        .arg(out.slice_mut())
        .arg(ops.slice_mut())
        .arg(&err_addr);
    // SAFETY: argument types and order match `bench_scoreboard`; the edge's addresses point
    // into `image_buf`, laid out by the planner for this allocation; `out`/`ops` hold one entry
    // per block.
    unsafe { b.launch(warp_blocks(blocks)) }.map_err(launch_err("launching bench_scoreboard"))?;
    s.synchronize()?;
    err.check()?;

    let state = image_buf.download()?;
    let base = image.base;
    let word = |addr: DevAddr| state[((addr - base) / 4) as usize];
    let consumer = &plan.stages[plan.edges[0].consumer.0];
    let n = consumer.tiles();
    let queue = edge.queue;
    let window = LaunchWindow::new(epoch, n);
    let mut times_queued = vec![0u32; n as usize];
    let mut published = true;
    for position in 0..n {
        let at = queue.slots + position as u64 * size_of::<WorkQueueSlot>() as u64;
        let (tile, seq) = (word(at), word(at + 4));
        published &= seq == prefill_slot(window, position, tile).seq;
        if let Some(t) = times_queued.get_mut(tile as usize) {
            *t += 1;
        }
    }
    let counters_at_target = (0..n)
        .filter(|&i| word(edge.scoreboard.counters + 4 * i as u64) == consumer.needed[i as usize])
        .count() as u32;
    let (t, k) = (out.download()?, ops.download()?);
    Ok(ScoreboardBench {
        fan,
        blocks,
        post_ns: median_per_op_of(&t, &k),
        producer_tiles: edge.deps.num_producers,
        posts: k.iter().sum(),
        arrivals: edge.deps.num_edges,
        consumer_tiles: n,
        pushed: pushed.download()?[0],
        tail: word(queue.counters + offset_of!(WorkQueueCounters, tail) as u64),
        queued_once: if published {
            times_queued.iter().filter(|&&c| c == 1).count() as u32
        } else {
            0
        },
        counters_at_target,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fans_plan_the_documented_dependency_arrays() {
        for (fan, row_len, needed) in [(Fan::OneToOne, 1usize, 1u32), (Fan::Row, 96, 48)] {
            let plan = fan.plan_spec().plan().expect("plan");
            let (p, c) = fan.grids();
            let edge = &plan.edges[0];
            assert_eq!(edge.offsets.len() as u32, p.count() + 1, "{fan:?}");
            for producer in 0..p.count() {
                assert_eq!(edge.row(producer).len(), row_len, "{fan:?} producer {producer}");
            }
            let consumer = &plan.stages[edge.consumer.0];
            assert_eq!(consumer.tiles(), c.count());
            assert!(consumer.needed.iter().all(|&n| n == needed), "{fan:?}");
            assert!(consumer.initial_ready.is_empty(), "{fan:?}: every consumer tile waits");
        }
    }

    #[test]
    fn per_op_medians_skip_blocks_that_did_nothing() {
        assert_eq!(median_per_op_of(&[100, 0, 300], &[10, 0, 10]), 20.0);
        assert!(median_per_op_of(&[5], &[0]).is_nan());
    }
}
