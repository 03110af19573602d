//! Which CTA slot of its SM each tile occupied.
//!
//! Events carry an SM but not a slot: with several co-resident CTAs per SM their tiles
//! overlap in time. Slots are recovered by interval partitioning: each SM's tiles, in dispatch
//! order, occupy `[t_dispatch, t_end)`; a tile takes the free slot that freed most recently (the
//! likeliest CTA to have picked it up), or opens a new slot. This uses the fewest slots
//! possible (the most tiles overlapping on the SM). A tile of the CTA (stage and block) that
//! last held a slot stays in that slot even when it overlaps the CTA's previous tile: GeMM path
//! 2's producer takes the next tile while its consumers finish the last one, and that is one
//! CTA slot, not two. In persistent mode the device's own slot is the CTA, which this recovers
//! whenever CTAs on one SM do not hand tiles to each other.

use crate::shared::layout::TraceEvent;

/// The slot assignment of a trace's events (indices into its `events`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slots {
    /// Slot of each event within its SM (0-based).
    pub slot: Vec<u32>,
    /// The event that ran before each event in the same slot, if any.
    pub prev: Vec<Option<usize>>,
    /// Position of each event in its slot's sequence (1 = first tile of the slot): its
    /// dispatch round.
    pub round: Vec<u32>,
    /// Slots used on each SM (index = SM id; SMs that ran nothing have 0).
    pub per_sm: Vec<u32>,
}

impl Slots {
    /// Assigns slots to `events` on a device of `sm_count` SMs (grown to cover every `sm` seen).
    pub fn assign(events: &[TraceEvent], sm_count: u32) -> Self {
        let sms = events.iter().map(|e| e.sm + 1).max().unwrap_or(0).max(sm_count) as usize;
        let mut by_sm: Vec<Vec<usize>> = vec![Vec::new(); sms];
        for (i, e) in events.iter().enumerate() {
            by_sm[e.sm as usize].push(i);
        }
        let mut out = Self {
            slot: vec![0; events.len()],
            prev: vec![None; events.len()],
            round: vec![0; events.len()],
            per_sm: vec![0; sms],
        };
        for (sm, mut idx) in by_sm.into_iter().enumerate() {
            idx.sort_by_key(|&i| {
                let e = &events[i];
                (e.t_dispatch, e.t_end, e.stage, e.tile)
            });
            // Per slot: (end of its last tile, that tile).
            let mut last: Vec<(u64, usize)> = Vec::new();
            for i in idx {
                let e = &events[i];
                // The same CTA (stage and block) keeps its slot even when its next tile was
                // taken before the last one ended: a warp-specialized producer runs ahead of
                // its consumers, which is one CTA, not two.
                let same_cta = last.iter().position(|&(_, p)| {
                    let q = &events[p];
                    (q.stage, q.cta) == (e.stage, e.cta)
                });
                let free = same_cta.or_else(|| {
                    last.iter()
                        .enumerate()
                        .filter(|(_, &(end, _))| end <= e.t_dispatch)
                        .max_by_key(|(k, &(end, _))| (end, std::cmp::Reverse(*k)))
                        .map(|(k, _)| k)
                });
                let k = match free {
                    Some(k) => {
                        let p = last[k].1;
                        out.prev[i] = Some(p);
                        out.round[i] = out.round[p] + 1;
                        k
                    }
                    None => {
                        out.round[i] = 1;
                        last.push((0, i));
                        last.len() - 1
                    }
                };
                last[k] = (last[k].0.max(e.t_end), i);
                out.slot[i] = k as u32;
            }
            out.per_sm[sm] = last.len() as u32;
        }
        out
    }

    /// The most slots any SM used.
    pub fn max_per_sm(&self) -> u32 {
        self.per_sm.iter().copied().max().unwrap_or(0)
    }
}
