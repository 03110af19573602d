//! The persistent megakernel's schedule in the wave model: how many tile times a planned graph
//! takes on `blocks` persistent blocks, against the same stages run as separate kernels.
//!
//! The model runs the **shared protocol itself** (the very functions the megakernel calls) on
//! a [`ProtocolImage`] of the [`Plan`] in host memory ([`AtomicWords`]), driven by a discrete
//! event clock:
//!
//! * Every block polls the stages in device order ([`device_order`]: the scheduler priority)
//!   with [`poll_queues_committing`], as the path-2 scheduler does. A [`Poll::Ticket`] commits
//!   the block to an unpublished slot; it starts that tile when the slot is published. A block
//!   that finds nothing polls again whenever a post publishes something.
//! * A tile of stage `s` runs for `tile_times[s]`; the block polls for its next tile as it
//!   ends (the scheduler warp pops ahead).
//! * A finished tile's post ([`post_producer_tile`] along each outgoing edge) takes effect
//!   `post_latency` after the tile ends (the post warp's fence, arrivals and pushes).
//!
//! It leaves out what the GPU adds: unequal tile times (L2, the power cap), the pop's round
//! trip, launch latency. So it bounds what pipelining can win from waves alone: a stack whose
//! tiles fill whole waves either way gains nothing, whatever the protocol costs.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::atomic::AtomicU32;

use cusync_shared::persistent::{poll_queues_committing, Poll, StageQueue};
use cusync_shared::protocol::{post_producer_tile, try_slot, AtomicWords, LaunchWindow};
use thiserror::Error;

use crate::persistent::{device_order, upstream_masks, SchedulePriority};
use crate::plan::{Plan, ProtocolImage, StageId};

/// Where the model puts the plan's protocol state (any 128-byte aligned address).
const IMAGE_BASE: u64 = 0x1000_0000;

/// What the persistent model needs besides the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct PersistentSimOptions {
    /// Persistent blocks (resident CTAs): 132 for one block per SM on an H100 or H200.
    pub blocks: u32,
    /// Run time of one tile, per stage (by [`StageId`]); one entry for all stages also works.
    pub tile_times: Vec<f64>,
    /// From a tile's end to its post's pushes being visible, in the same unit.
    pub post_latency: f64,
    /// Which stage's ready tiles a block takes first.
    pub priority: SchedulePriority,
}

impl PersistentSimOptions {
    /// `blocks` blocks, unit tile times (makespans in waves of tile time), posts visible
    /// after `post_latency`.
    pub fn unit(blocks: u32, post_latency: f64, priority: SchedulePriority) -> Self {
        Self {
            blocks,
            tile_times: vec![1.0],
            post_latency,
            priority,
        }
    }

    fn tile_time(&self, stage: StageId) -> f64 {
        match self.tile_times.as_slice() {
            [one] => *one,
            all => all[stage.0],
        }
    }
}

/// One stage's span in a simulated launch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageSpan {
    /// When its first tile started.
    pub first_start: f64,
    /// When its last tile ended.
    pub last_end: f64,
}

/// A simulated persistent launch.
#[derive(Clone, Debug, PartialEq)]
pub struct PersistentSimOutcome {
    /// When the last tile ended.
    pub makespan: f64,
    /// Per stage (by [`StageId`]).
    pub stages: Vec<StageSpan>,
    /// Tile time over block time: the sum of every tile's time over `blocks * makespan`.
    pub utilization: f64,
}

/// Why a model run failed.
#[derive(Debug, Error, PartialEq)]
pub enum PersistentSimError {
    /// The options do not fit the plan.
    #[error("invalid model options: {0}")]
    Options(String),
    /// The shared protocol reported an error (a bug in the plan or the protocol).
    #[error("stage index {stage}: {error}")]
    Protocol {
        /// Device stage index.
        stage: u32,
        /// The protocol's report.
        error: String,
    },
    /// Every block waits and no post is pending: the plan cannot complete.
    #[error("no progress at time {time}: {done} of {total} tiles ran")]
    Stalled {
        /// Model time when it stalled.
        time: f64,
        /// Tiles that ran.
        done: u32,
        /// Tiles in the plan.
        total: u32,
    },
}

/// What a block is doing.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Block {
    /// Found nothing ready; polls again after the next post.
    Idle,
    /// Holds a ticket of device stage `stage` whose slot is not published yet.
    Ticket { stage: u32, position: u32 },
    /// Runs a tile (its end is an event).
    Busy,
    /// Every stage is finished for it.
    Exited,
}

/// A timed event: a tile's end (its block polls again) or its post taking effect.
#[derive(Clone, Copy, Debug)]
struct Event {
    time: f64,
    /// Tie-break: posts before ends at the same time, then in creation order.
    rank: (u8, u64),
    kind: EventKind,
}

#[derive(Clone, Copy, Debug)]
enum EventKind {
    End { block: u32 },
    Post { stage: StageId, tile: u32 },
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed: [`BinaryHeap`] pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .total_cmp(&self.time)
            .then_with(|| other.rank.cmp(&self.rank))
    }
}

/// The model's state for one launch.
struct Model<'a> {
    plan: &'a Plan,
    image: &'a ProtocolImage,
    mem: AtomicWords<'a>,
    opts: &'a PersistentSimOptions,
    /// Stage ids in device order, and each one's queue as the scheduler sees it.
    device: Vec<StageId>,
    queues: Vec<StageQueue>,
    blocks: Vec<Block>,
    /// Per block, the stages (device indices, a bit each) it found finished.
    finished: Vec<u32>,
    events: BinaryHeap<Event>,
    created: u64,
    spans: Vec<StageSpan>,
    done: u32,
    work: f64,
}

impl Model<'_> {
    fn push(&mut self, time: f64, kind: EventKind) {
        self.created += 1;
        let class = match kind {
            EventKind::Post { .. } => 0,
            EventKind::End { .. } => 1,
        };
        self.events.push(Event {
            time,
            rank: (class, self.created),
            kind,
        });
    }

    fn protocol_error(stage: u32, error: impl std::fmt::Display) -> PersistentSimError {
        PersistentSimError::Protocol {
            stage,
            error: error.to_string(),
        }
    }

    /// Starts tile `tile` of device stage `index` on `block` at `time`.
    fn start(&mut self, block: u32, index: u32, tile: u32, time: f64) {
        let stage = self.device[index as usize];
        let t = self.opts.tile_time(stage);
        let span = &mut self.spans[stage.0];
        if span.first_start.is_nan() || time < span.first_start {
            span.first_start = time;
        }
        span.last_end = span.last_end.max(time + t);
        self.work += t;
        self.done += 1;
        self.blocks[block as usize] = Block::Busy;
        self.push(time + t, EventKind::End { block });
        self.push(time + t + self.opts.post_latency, EventKind::Post { stage, tile });
    }

    /// One scheduler round of `block` at `time`.
    fn poll(&mut self, block: u32, time: f64) -> Result<(), PersistentSimError> {
        let queues = &self.queues;
        let poll = poll_queues_committing(
            &self.mem,
            queues.len() as u32,
            0,
            0,
            &mut self.finished[block as usize],
            |i| queues[i as usize],
        )
        .map_err(|e| Self::protocol_error(e.stage, e.error))?;
        match poll {
            Poll::Tile { stage, tile } => self.start(block, stage, tile, time),
            Poll::Ticket { stage, position } => self.blocks[block as usize] = Block::Ticket { stage, position },
            Poll::Empty => self.blocks[block as usize] = Block::Idle,
            Poll::Done => self.blocks[block as usize] = Block::Exited,
        }
        Ok(())
    }

    /// After a post: every committed block whose slot is now published starts it, then every
    /// idle block polls again (in block order).
    fn wake(&mut self, time: f64) -> Result<(), PersistentSimError> {
        for b in 0..self.blocks.len() as u32 {
            if let Block::Ticket { stage, position } = self.blocks[b as usize] {
                let q = self.queues[stage as usize];
                let window = LaunchWindow::new(0, q.tiles);
                if let Some(tile) =
                    try_slot(&self.mem, &q.queue, window, position).map_err(|e| Self::protocol_error(stage, e))?
                {
                    self.start(b, stage, tile, time);
                }
            }
        }
        for b in 0..self.blocks.len() as u32 {
            if self.blocks[b as usize] == Block::Idle {
                self.poll(b, time)?;
            }
        }
        Ok(())
    }

    fn run(mut self) -> Result<PersistentSimOutcome, PersistentSimError> {
        let total: u32 = self.plan.stages.iter().map(|s| s.tiles()).sum();
        for b in 0..self.opts.blocks {
            self.poll(b, 0.0)?;
        }
        let mut now = 0.0;
        while let Some(event) = self.events.pop() {
            now = event.time;
            match event.kind {
                EventKind::End { block } => self.poll(block, now)?,
                EventKind::Post { stage, tile } => {
                    for edge in self.image.outgoing(self.plan, stage) {
                        post_producer_tile(&self.mem, edge, tile, 0).map_err(|e| {
                            // The posting stage's device index (error path only).
                            let index = self.device.iter().position(|&s| s == stage).unwrap_or(0);
                            Self::protocol_error(index as u32, e)
                        })?;
                    }
                    self.wake(now)?;
                }
            }
        }
        if self.done != total {
            return Err(PersistentSimError::Stalled {
                time: now,
                done: self.done,
                total,
            });
        }
        let makespan = self.spans.iter().map(|s| s.last_end).fold(0.0, f64::max);
        Ok(PersistentSimOutcome {
            makespan,
            utilization: self.work / (f64::from(self.opts.blocks) * makespan),
            stages: self.spans,
        })
    }
}

/// Runs one launch of `plan` in the model (module docs).
pub fn simulate_persistent(
    plan: &Plan,
    opts: &PersistentSimOptions,
) -> Result<PersistentSimOutcome, PersistentSimError> {
    let n = plan.stages.len();
    if opts.blocks == 0 {
        return Err(PersistentSimError::Options("at least one block".into()));
    }
    if opts.tile_times.len() != 1 && opts.tile_times.len() != n {
        return Err(PersistentSimError::Options(format!(
            "{} tile times for {n} stages (give one, or one per stage)",
            opts.tile_times.len()
        )));
    }
    let positive = |t: f64| t.is_finite() && t > 0.0;
    if !opts.tile_times.iter().all(|&t| positive(t)) || !(positive(opts.post_latency) || opts.post_latency == 0.0) {
        return Err(PersistentSimError::Options(
            "tile times must be positive and the post latency non-negative".into(),
        ));
    }
    if n > cusync_shared::persistent::MAX_STAGES as usize {
        return Err(PersistentSimError::Options(format!(
            "{n} stages; the scheduler tracks at most {}",
            cusync_shared::persistent::MAX_STAGES
        )));
    }
    let image = ProtocolImage::new(plan, IMAGE_BASE);
    let words: Vec<AtomicU32> = image.words.iter().map(|&w| AtomicU32::new(w)).collect();
    let mem = AtomicWords::new(image.base, &words);
    for (addr, value) in image.prefill_writes(plan, 0) {
        cusync_shared::protocol::ProtocolMemory::store_relaxed(&mem, addr, value);
    }
    let device = device_order(&plan.topo_order, opts.priority);
    let upstream = upstream_masks(plan, &device);
    let queues = device
        .iter()
        .zip(&upstream)
        .map(|(s, &up)| StageQueue {
            queue: image.stages[s.0].queue,
            tiles: plan.stages[s.0].tiles(),
            upstream: up,
        })
        .collect();
    let model = Model {
        plan,
        image: &image,
        mem,
        opts,
        device,
        queues,
        blocks: vec![Block::Idle; opts.blocks as usize],
        finished: vec![0; opts.blocks as usize],
        events: BinaryHeap::new(),
        created: 0,
        spans: vec![
            StageSpan {
                first_start: f64::NAN,
                last_end: 0.0,
            };
            n
        ],
        done: 0,
        work: 0.0,
    };
    model.run()
}

/// The same stages as separate kernels, one after another in topological order, each on
/// `blocks` persistent blocks: the sum over stages of whole waves times the tile time.
pub fn separate_kernels_time(plan: &Plan, opts: &PersistentSimOptions) -> f64 {
    plan.topo_order
        .iter()
        .map(|&s| f64::from(plan.stages[s.0].tiles().div_ceil(opts.blocks)) * opts.tile_time(s))
        .sum()
}

/// No schedule on `blocks` blocks is shorter than its work spread evenly over them, in whole
/// waves where every tile takes the same time.
pub fn waves_bound(plan: &Plan, opts: &PersistentSimOptions) -> f64 {
    let work: f64 = plan
        .topo_order
        .iter()
        .map(|&s| f64::from(plan.stages[s.0].tiles()) * opts.tile_time(s))
        .sum();
    let per_block = work / f64::from(opts.blocks);
    if opts.tile_times.iter().all(|&t| t == opts.tile_times[0]) {
        (per_block / opts.tile_times[0] - 1e-9).ceil() * opts.tile_times[0]
    } else {
        per_block
    }
}
