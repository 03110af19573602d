//! The critical path: the chain of tiles that gated the last tile's end.
//!
//! The device records no dependency lists, so the chain is rebuilt from times alone. Walking
//! back from the tile that ended last, a tile `q` was gated by the latest-ending of:
//!
//! * **slot**: the tile that ran before `q` in the same SM slot (see [`super::slots`]); `q`
//!   could not be dispatched before that slot freed;
//! * **dependency** (stages after the first only): the tile of the previous stage, in stage-id
//!   order, with the latest `t_end <= q.t_ready`. That is the last producer post `q` could have
//!   waited for; under stream synchronization it is the kernel boundary.
//!
//! (on a tie, the dependency). The walk stops at a tile with neither. What is approximated:
//! the dependency edge assumes `q` read that producer tile (the policy's real dependency list
//! is not in the trace; the true gating post may be an earlier one, never a later one);
//! stages are assumed to form a chain in id order; slots are inferred, not recorded; and SM
//! contention between co-resident CTAs is not modelled.
//!
//! Every step owns the time from its predecessor's end (its *gate*) to its own end, split into
//! `latency` (gate to main-loop start: dispatch, waiting, post propagation, prologue) and
//! `work` (main loop). The steps' times add up to the whole span, first dispatch to last end.

use std::collections::BTreeMap;

use crate::shared::layout::TraceEvent;

use super::slots::Slots;

/// How a step of the critical path was gated by the step before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    /// The first step: gated by nothing but the first dispatch.
    Start,
    /// The previous step ran before it in the same SM slot.
    Slot,
    /// The previous step is the previous stage's latest tile to end by this step's `t_ready`.
    Dependency,
}

/// One tile on the critical path. Times are ns since the first dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathStep {
    /// Index of the tile in the trace's events.
    pub event: usize,
    /// Its stage.
    pub stage: u32,
    /// Its tile id.
    pub tile: u32,
    /// Its SM.
    pub sm: u32,
    /// Its slot on that SM.
    pub slot: u32,
    /// How the previous step gated it.
    pub via: Edge,
    /// The previous step's end (0 for the first step).
    pub gate_ns: u64,
    /// Its main-loop start.
    pub start_ns: u64,
    /// Its end.
    pub end_ns: u64,
    /// `max(start, gate) - gate`: time on the path not spent in a main loop.
    pub latency_ns: u64,
    /// `end - max(start, gate)`: main-loop time on the path.
    pub work_ns: u64,
}

/// The critical path, first tile first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CriticalPath {
    /// The steps, first dispatch to last end.
    pub steps: Vec<PathStep>,
    /// Sum of the steps' `work_ns`.
    pub work_ns: u64,
    /// Sum of the steps' `latency_ns` (`work_ns + latency_ns` is the span).
    pub latency_ns: u64,
    /// Steps gated through an SM slot.
    pub slot_edges: u32,
    /// Steps gated through a dependency on the previous stage.
    pub dependency_edges: u32,
}

impl CriticalPath {
    /// The critical path of `events` (times relative to the first dispatch, so the first
    /// step's gate is 0) with their `slots`; `stage_ids` in stage order.
    pub(crate) fn compute(events: &[TraceEvent], slots: &Slots, stage_ids: &[u32]) -> Self {
        let Some(last) = (0..events.len()).max_by_key(|&i| {
            let e = &events[i];
            (e.t_end, e.stage, e.tile)
        }) else {
            return Self::default();
        };
        // Per stage, (t_end, event) ascending.
        let mut ends: BTreeMap<u32, Vec<(u64, usize)>> = BTreeMap::new();
        for (i, e) in events.iter().enumerate() {
            ends.entry(e.stage).or_default().push((e.t_end, i));
        }
        for v in ends.values_mut() {
            v.sort_unstable();
        }
        let previous_stage = |stage: u32| {
            let pos = stage_ids.iter().position(|&s| s == stage)?;
            stage_ids[..pos].iter().rev().find(|s| ends.contains_key(s)).copied()
        };

        let mut visited = vec![false; events.len()];
        let mut chain: Vec<(usize, Edge)> = Vec::new();
        let mut q = last;
        loop {
            visited[q] = true;
            let e = &events[q];
            let slot = slots.prev[q].map(|p| (events[p].t_end, p));
            let dep = previous_stage(e.stage).and_then(|s| {
                let v = &ends[&s];
                let n = v.partition_point(|&(end, _)| end <= e.t_ready);
                n.checked_sub(1).map(|k| v[k])
            });
            let next = match (slot, dep) {
                (Some(s), Some(d)) if s.0 > d.0 => Some((s.1, Edge::Slot)),
                (_, Some(d)) => Some((d.1, Edge::Dependency)),
                (Some(s), None) => Some((s.1, Edge::Slot)),
                (None, None) => None,
            };
            match next {
                Some((p, via)) if !visited[p] => {
                    chain.push((q, via));
                    q = p;
                }
                _ => {
                    chain.push((q, Edge::Start));
                    break;
                }
            }
        }
        chain.reverse();

        let mut path = Self::default();
        let mut gate = 0;
        for &(i, via) in &chain {
            let e = &events[i];
            let begin = e.t_start.max(gate);
            let step = PathStep {
                event: i,
                stage: e.stage,
                tile: e.tile,
                sm: e.sm,
                slot: slots.slot[i],
                via,
                gate_ns: gate,
                start_ns: e.t_start,
                end_ns: e.t_end,
                latency_ns: begin - gate,
                work_ns: e.t_end - begin,
            };
            path.work_ns += step.work_ns;
            path.latency_ns += step.latency_ns;
            match via {
                Edge::Slot => path.slot_edges += 1,
                Edge::Dependency => path.dependency_edges += 1,
                Edge::Start => {}
            }
            path.steps.push(step);
            gate = e.t_end;
        }
        path
    }
}
