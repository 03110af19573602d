//! [`ProtocolImage`]: a [`Plan`]'s protocol state laid out as one array of `u32` words.

use std::mem::size_of;

use cusync_shared::layout::{DependencyArray, DevAddr, Scoreboard, WorkQueue, WorkQueueCounters, WorkQueueSlot};
use cusync_shared::protocol::PersistentEdge;

use super::{Plan, StageId};

/// Words per 128-byte line: every array starts on its own line, so counters that different
/// stages hammer never share one.
const LINE_WORDS: usize = 128 / 4;

/// Where one stage's protocol state lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageMemory {
    /// Its workqueue (head and tail on separate lines, one slot per tile).
    pub queue: WorkQueue,
    /// Its scoreboard (one counter per tile).
    pub scoreboard: Scoreboard,
    /// Its scoreboard targets (`u32` per tile, [`super::StagePlan::needed`]).
    pub needed: DevAddr,
    /// A `u32` tile counter, for kernels that take tickets instead of popping
    /// (`cusync_shared::protocol::take_tile`).
    pub tile_counter: DevAddr,
}

/// A plan's protocol state as the device sees it: `words` is the initial content of one
/// allocation at `base` (upload it once; nothing is cleared between launches), `stages` and
/// `edges` the descriptors kernels receive, with absolute addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolImage {
    /// Address of word 0 (128-byte aligned for the line separation to hold; `cuMemAlloc`
    /// returns 256-byte aligned memory).
    pub base: DevAddr,
    /// The initial words (counters zero, targets and dependency arrays filled in).
    pub words: Vec<u32>,
    /// Per stage, indexed by [`StageId`].
    pub stages: Vec<StageMemory>,
    /// Per edge, in the plan's order.
    pub edges: Vec<PersistentEdge>,
}

/// Bump allocator over the word array.
struct Layout {
    base: DevAddr,
    words: Vec<u32>,
}

impl Layout {
    /// `n` zero words on a fresh line.
    fn alloc(&mut self, n: usize) -> DevAddr {
        let start = self.words.len().next_multiple_of(LINE_WORDS);
        self.words.resize(start + n, 0);
        self.base + 4 * start as u64
    }

    fn array(&mut self, values: &[u32]) -> DevAddr {
        let addr = self.alloc(values.len());
        let start = self.words.len() - values.len();
        self.words[start..].copy_from_slice(values);
        addr
    }
}

impl ProtocolImage {
    /// Lays out `plan` at `base`.
    pub fn new(plan: &Plan, base: DevAddr) -> Self {
        let mut mem = Layout {
            base,
            words: Vec::new(),
        };
        let stages: Vec<StageMemory> = plan
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let queue = WorkQueue {
                    counters: mem.alloc(size_of::<WorkQueueCounters>() / 4),
                    slots: mem.alloc(s.queue_capacity as usize * size_of::<WorkQueueSlot>() / 4),
                    capacity: s.queue_capacity,
                    stage: i as u32,
                };
                StageMemory {
                    queue,
                    scoreboard: Scoreboard {
                        counters: mem.alloc(s.needed.len()),
                        len: s.tiles(),
                        _pad: 0,
                    },
                    needed: mem.array(&s.needed),
                    tile_counter: mem.alloc(1),
                }
            })
            .collect();
        let edges = plan
            .edges
            .iter()
            .map(|e| {
                let into = stages[e.consumer.0];
                PersistentEdge {
                    deps: DependencyArray {
                        offsets: mem.array(&e.offsets),
                        consumers: mem.array(&e.consumers),
                        num_producers: e.offsets.len() as u32 - 1,
                        num_edges: e.consumers.len() as u32,
                    },
                    scoreboard: into.scoreboard,
                    needed: into.needed,
                    queue: into.queue,
                }
            })
            .collect();
        Self {
            base,
            words: mem.words,
            stages,
            edges,
        }
    }

    /// The word writes that prefill every stage's queue for launch `epoch` (slots from
    /// position 0, then the tail and the head), as `(address, value)`; apply them between
    /// launches.
    pub fn prefill_writes(&self, plan: &Plan, epoch: u32) -> Vec<(DevAddr, u32)> {
        let mut writes = Vec::new();
        for (i, stage) in plan.stages.iter().enumerate() {
            let queue = &self.stages[i].queue;
            let prefill = stage.prefill(epoch);
            for (position, slot) in prefill.slots.iter().enumerate() {
                let at = queue.slots + (position * size_of::<WorkQueueSlot>()) as u64;
                writes.push((at, slot.tile));
                writes.push((at + 4, slot.seq));
            }
            writes.push((
                queue.counters + std::mem::offset_of!(WorkQueueCounters, tail) as u64,
                prefill.tail,
            ));
            writes.push((
                queue.counters + std::mem::offset_of!(WorkQueueCounters, head) as u64,
                prefill.head,
            ));
        }
        writes
    }

    /// The descriptors of the edges stage `stage` posts along.
    pub fn outgoing<'a>(&'a self, plan: &'a Plan, stage: StageId) -> impl Iterator<Item = &'a PersistentEdge> + 'a {
        plan.stages[stage.0].outgoing.iter().map(|&e| &self.edges[e])
    }
}
