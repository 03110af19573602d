//! Event-driven schedule of a producer and a consumer kernel on a GPU's SMs.
//!
//! The model (the CuSync paper's, made explicit):
//!
//! * Each SM holds thread blocks up to its occupancy. Kernels of different occupancy share an
//!   SM in proportion: a block of a kernel with occupancy `o` takes `1/o` of an SM.
//! * Blocks are dispatched in one FIFO, in order: all producer blocks in the producer's tile
//!   order, then all consumer blocks in the consumer's order (the wait kernel makes the
//!   producer launch first; the hardware dispatches an earlier kernel's blocks first). The
//!   block at the head takes the first SM with room as soon as one frees up.
//! * A producer block runs for its tile time, then posts.
//! * A consumer block's tile time is spread evenly over its dependency's steps
//!   ([`Dependency::step`]); before a step the policy may wait, which holds the SM slot (a
//!   spinning block) until the semaphore is complete, and costs `wait_cost` on top.
//! * Stream synchronization runs the producer alone, then the consumer alone.
//!
//! Times are in units of the caller's choosing: unit tile times give makespans in waves.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use crate::shared::order::TileOrder;
use crate::shared::policy::{Dependency, SyncPolicy};
use crate::shared::{Grid, TileIdx};

use super::orders::order_buffer;

/// One kernel as the scheduler sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct StageSpec {
    /// The launch grid.
    pub grid: Grid,
    /// Thread blocks per SM.
    pub occupancy: u32,
    /// Run time of one thread block (all blocks of a kernel take the same time).
    pub tile_time: f64,
    /// Tiles in dispatch order (a built-in order's [`order_buffer`] or a user-defined one).
    pub order: Vec<TileIdx>,
}

impl StageSpec {
    /// A stage dispatched in a built-in `order`.
    pub fn new(grid: Grid, occupancy: u32, tile_time: f64, order: TileOrder) -> Self {
        Self {
            grid,
            occupancy,
            tile_time,
            order: order_buffer(order, grid),
        }
    }
}

/// What a simulated schedule achieved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScheduleStats {
    /// When the last block finished.
    pub makespan: f64,
    /// Work time over SM time: sum over blocks of `tile_time / occupancy`, divided by
    /// `SMs * makespan`. Waiting and wait costs are not work.
    pub utilization: f64,
    /// When the last producer block finished.
    pub producer_done: f64,
    /// When the first consumer block was dispatched.
    pub consumer_first_start: f64,
    /// Waits the consumer blocks performed.
    pub waits: u64,
    /// Time consumer blocks spent blocked in waits (not counting `wait_cost`).
    pub blocked_time: f64,
}

/// Why a schedule cannot complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// A consumer waits for more than the producer ever posts: on a GPU it would spin until
    /// its timeout.
    #[error("consumer tile {consumer_tile:?} waits for semaphore {semaphore} to reach {value}, but the producer posts only {posted}")]
    WaitNeverSatisfied {
        /// The waiting consumer tile.
        consumer_tile: TileIdx,
        /// The semaphore.
        semaphore: u32,
        /// The value it waits for.
        value: u32,
        /// What one producer launch posts there.
        posted: u32,
    },
    /// A policy names a semaphore outside its array.
    #[error("semaphore {semaphore} is outside the policy's {count} semaphores")]
    SemaphoreOutOfRange {
        /// The semaphore.
        semaphore: u32,
        /// The policy's semaphore count.
        count: u32,
    },
    /// A block cannot fit on any SM (occupancy 0), or there are no SMs.
    #[error("a thread block with occupancy 0 fits on no SM, or the GPU has no SMs")]
    NoRoom,
}

/// Stream synchronization: the producer kernel runs to completion, then the consumer.
pub fn simulate_stream_sync(
    producer: &StageSpec,
    consumer: &StageSpec,
    sms: u32,
) -> Result<ScheduleStats, ScheduleError> {
    let p = run_alone(producer, sms)?;
    let c = run_alone(consumer, sms)?;
    let makespan = p + c;
    Ok(ScheduleStats {
        makespan,
        utilization: (work(producer) + work(consumer)) / (f64::from(sms) * makespan),
        producer_done: p,
        consumer_first_start: p,
        waits: 0,
        blocked_time: 0.0,
    })
}

/// Fine-grained synchronization: both kernels share the SMs; consumer blocks wait on the
/// policy's semaphores. The policy is not validated here (see `cusync_shared::policy::validate`);
/// a wait that can never complete is an error, as a hang would be on the GPU.
pub fn simulate_fine_grained<P: SyncPolicy + ?Sized>(
    producer: &StageSpec,
    consumer: &StageSpec,
    dependency: Dependency,
    policy: &P,
    sms: u32,
    wait_cost: f64,
) -> Result<ScheduleStats, ScheduleError> {
    let mut machine = Machine::new(sms, &[producer.occupancy, consumer.occupancy])?;
    let mut semaphores = Semaphores::new(policy.semaphore_count(producer.grid, consumer.grid));
    let mut stats = ScheduleStats::default();
    let (pg, cg) = (producer.grid, consumer.grid);
    let mut queue: VecDeque<(usize, TileIdx)> = producer
        .order
        .iter()
        .map(|&t| (0, t))
        .chain(consumer.order.iter().map(|&t| (1, t)))
        .collect();
    let mut consumer_started = false;
    loop {
        while let Some(&(stage, tile)) = queue.front() {
            let Some(slot) = machine.take(stage) else { break };
            let now = machine.now;
            let end = if stage == 0 {
                let end = now + producer.tile_time;
                if let Some(post) = policy.post(pg, cg, tile) {
                    semaphores.post(post.semaphore, post.amount, end)?;
                }
                stats.producer_done = stats.producer_done.max(end);
                end
            } else {
                if !consumer_started {
                    consumer_started = true;
                    stats.consumer_first_start = now;
                }
                consumer_end(
                    consumer,
                    pg,
                    dependency,
                    policy,
                    tile,
                    now,
                    wait_cost,
                    &semaphores,
                    &mut stats,
                )?
            };
            machine.run(slot, end);
            queue.pop_front();
        }
        if !machine.advance() {
            break;
        }
    }
    stats.makespan = machine.now;
    stats.utilization = (work(producer) + work(consumer)) / (f64::from(sms) * stats.makespan);
    Ok(stats)
}

/// When a consumer block dispatched at `now` finishes, walking its steps and waits.
#[allow(clippy::too_many_arguments)]
fn consumer_end<P: SyncPolicy + ?Sized>(
    consumer: &StageSpec,
    producer_grid: Grid,
    dependency: Dependency,
    policy: &P,
    tile: TileIdx,
    now: f64,
    wait_cost: f64,
    semaphores: &Semaphores,
    stats: &mut ScheduleStats,
) -> Result<f64, ScheduleError> {
    let steps = dependency.step_count(producer_grid, tile);
    if steps == 0 {
        return Ok(now + consumer.tile_time);
    }
    // Position after `i` steps = resume_time + (i - resume_step) * step time; re-anchored only
    // when a wait blocks or costs, so unit times stay exact.
    let step_time = |n: u32| f64::from(n) * consumer.tile_time / f64::from(steps);
    let (mut resume_time, mut resume_step) = (now, 0);
    for i in 0..steps {
        let step = dependency.step(producer_grid, tile, i);
        let Some(w) = policy.wait(producer_grid, consumer.grid, tile, step) else {
            continue;
        };
        let ready = semaphores
            .ready_at(w.semaphore, w.value)
            .map_err(|posted| ScheduleError::WaitNeverSatisfied {
                consumer_tile: tile,
                semaphore: w.semaphore,
                value: w.value,
                posted,
            })?;
        stats.waits += 1;
        let cursor = resume_time + step_time(i - resume_step);
        if ready > cursor || wait_cost > 0.0 {
            stats.blocked_time += (ready - cursor).max(0.0);
            resume_time = cursor.max(ready) + wait_cost;
            resume_step = i;
        }
    }
    Ok(resume_time + step_time(steps - resume_step))
}

/// Makespan of a kernel alone on the machine.
fn run_alone(stage: &StageSpec, sms: u32) -> Result<f64, ScheduleError> {
    let mut machine = Machine::new(sms, &[stage.occupancy])?;
    for _ in &stage.order {
        let slot = loop {
            if let Some(slot) = machine.take(0) {
                break slot;
            }
            machine.advance();
        };
        let end = machine.now + stage.tile_time;
        machine.run(slot, end);
    }
    while machine.advance() {}
    Ok(machine.now)
}

/// Work of a stage in SM-time: every block's time times the share of an SM it takes.
fn work(stage: &StageSpec) -> f64 {
    stage.order.len() as f64 * stage.tile_time / f64::from(stage.occupancy)
}

/// Per-semaphore post times; all producer blocks are dispatched (so their end times known)
/// before the first consumer block.
struct Semaphores {
    posts: Vec<Vec<(f64, u32)>>,
}

impl Semaphores {
    fn new(count: u32) -> Self {
        Self {
            posts: vec![Vec::new(); count as usize],
        }
    }

    fn post(&mut self, semaphore: u32, amount: u32, at: f64) -> Result<(), ScheduleError> {
        let count = self.posts.len() as u32;
        let list = self
            .posts
            .get_mut(semaphore as usize)
            .ok_or(ScheduleError::SemaphoreOutOfRange { semaphore, count })?;
        let i = list.partition_point(|&(t, _)| t <= at);
        list.insert(i, (at, amount));
        Ok(())
    }

    /// The time `semaphore` reaches `value`, or `Err(total)` if it never does.
    fn ready_at(&self, semaphore: u32, value: u32) -> Result<f64, u32> {
        let Some(list) = self.posts.get(semaphore as usize) else {
            return Err(0);
        };
        let mut total = 0u32;
        if value == 0 {
            return Ok(0.0);
        }
        for &(t, amount) in list {
            total += amount;
            if total >= value {
                return Ok(t);
            }
        }
        Err(total)
    }
}

/// SMs with room measured in units: an SM has `lcm(occupancies)` units, a block of a kernel
/// with occupancy `o` takes `units / o`.
struct Machine {
    free: Vec<u32>,
    cost: Vec<u32>,
    running: BinaryHeap<Finish>,
    now: f64,
}

/// A running block: when it ends and what it gives back.
#[derive(Clone, Copy, PartialEq)]
struct Finish {
    at: f64,
    sm: usize,
    units: u32,
}

impl Eq for Finish {}

impl Ord for Finish {
    /// Earliest first (the heap is a max-heap), then lowest SM, for a deterministic order.
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.total_cmp(&self.at).then(other.sm.cmp(&self.sm))
    }
}

impl PartialOrd for Finish {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Machine {
    fn new(sms: u32, occupancies: &[u32]) -> Result<Self, ScheduleError> {
        if sms == 0 || occupancies.contains(&0) {
            return Err(ScheduleError::NoRoom);
        }
        let units = occupancies.iter().fold(1, |acc, &o| lcm(acc, o));
        Ok(Self {
            free: vec![units; sms as usize],
            cost: occupancies.iter().map(|&o| units / o).collect(),
            running: BinaryHeap::new(),
            now: 0.0,
        })
    }

    /// Reserves room for a block of `kind` on the first SM that has it.
    fn take(&mut self, kind: usize) -> Option<(usize, u32)> {
        let units = self.cost[kind];
        let sm = self.free.iter().position(|&f| f >= units)?;
        self.free[sm] -= units;
        Some((sm, units))
    }

    fn run(&mut self, (sm, units): (usize, u32), until: f64) {
        self.running.push(Finish { at: until, sm, units });
    }

    /// Moves time to the next block end and frees every block ending then. False when
    /// nothing runs.
    fn advance(&mut self) -> bool {
        let Some(first) = self.running.pop() else { return false };
        self.now = first.at;
        self.free[first.sm] += first.units;
        while let Some(next) = self.running.peek() {
            if next.at > self.now {
                break;
            }
            let next = self.running.pop().expect("peeked");
            self.free[next.sm] += next.units;
        }
        true
    }
}

fn lcm(a: u32, b: u32) -> u32 {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    a / gcd(a, b) * b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::policy::{PolicyKind, RowSync, TileSync};

    fn unit(grid: Grid, occupancy: u32) -> StageSpec {
        StageSpec::new(grid, occupancy, 1.0, TileOrder::RowMajor)
    }

    /// The paper's motivating example: 3x2 tiles each, 4 SMs of one block: 4 waves with
    /// stream sync, 3 with fine-grained row synchronization.
    #[test]
    fn motivation_example_takes_three_waves_instead_of_four() {
        let (p, c) = (unit(Grid::new(3, 2, 1), 1), unit(Grid::new(3, 2, 1), 1));
        let stream = simulate_stream_sync(&p, &c, 4).unwrap();
        assert_eq!(stream.makespan, 4.0);
        let fine = simulate_fine_grained(&p, &c, Dependency::GemmRow, &RowSync, 4, 0.0).unwrap();
        assert_eq!(fine.makespan, 3.0);
        assert_eq!(fine.utilization, 1.0);
        assert_eq!(fine.waits, 6);
    }

    #[test]
    fn tile_sync_lets_a_consumer_start_on_a_partly_done_row() {
        // One producer row of 4 tiles on 3 slots: columns 0-2 done at 1, column 3 at 2. A
        // consumer block dispatched at 1 does 3 of its 4 steps before it needs column 3.
        let (p, c) = (unit(Grid::new(1, 4, 1), 1), unit(Grid::new(1, 1, 1), 1));
        let row = simulate_fine_grained(&p, &c, Dependency::GemmRow, &RowSync, 3, 0.0).unwrap();
        let tile = simulate_fine_grained(&p, &c, Dependency::GemmRow, &TileSync, 3, 0.0).unwrap();
        assert_eq!(row.makespan, 3.0);
        assert_eq!(tile.makespan, 2.25);
        assert_eq!(tile.blocked_time, 0.25);
        assert_eq!(tile.waits, 4);
    }

    #[test]
    fn a_wait_that_never_completes_is_an_error() {
        let (p, c) = (unit(Grid::new(2, 2, 1), 1), unit(Grid::new(2, 2, 1), 1));
        struct Greedy;
        impl SyncPolicy for Greedy {
            fn semaphore_count(&self, p: Grid, c: Grid) -> u32 {
                RowSync.semaphore_count(p, c)
            }
            fn post(&self, p: Grid, c: Grid, t: TileIdx) -> Option<crate::shared::policy::Post> {
                RowSync.post(p, c, t)
            }
            fn wait(
                &self,
                p: Grid,
                c: Grid,
                t: TileIdx,
                s: crate::shared::policy::Step,
            ) -> Option<crate::shared::policy::Wait> {
                RowSync
                    .wait(p, c, t, s)
                    .map(|w| crate::shared::policy::Wait { value: 3, ..w })
            }
        }
        let r = simulate_fine_grained(&p, &c, Dependency::GemmRow, &Greedy, 2, 0.0);
        assert!(matches!(
            r,
            Err(ScheduleError::WaitNeverSatisfied {
                value: 3,
                posted: 2,
                ..
            })
        ));
    }

    #[test]
    fn mixed_occupancy_shares_sms_in_proportion() {
        // Producer blocks take half an SM, consumer blocks a whole one: on 1 SM the two
        // producer blocks run together, then the consumer.
        let p = unit(Grid::new(1, 2, 1), 2);
        let c = unit(Grid::new(1, 1, 1), 1);
        let fine = simulate_fine_grained(&p, &c, Dependency::GemmRow, &PolicyKind::RowSync, 1, 0.0).unwrap();
        assert_eq!(fine.makespan, 2.0);
        assert_eq!(fine.utilization, 1.0);
        assert_eq!(fine.consumer_first_start, 1.0);
    }
}
