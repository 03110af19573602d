//! The plain-text report of an [`Analysis`] (what `cusync trace analyze` prints).

use std::fmt::{self, Display, Write as _};

use super::analysis::{Analysis, SLOW_SM_FACTOR};
use super::critical::Edge;

/// Steps of the critical path printed at each end before eliding the middle.
const PATH_HEAD: usize = 6;
const PATH_TAIL: usize = 6;
/// Width of the busy-timeline bars.
const BAR: usize = 40;
/// Slow SMs named per stage before the rest are counted.
const SLOW_SMS_SHOWN: usize = 16;

fn us(ns: impl Into<f64>) -> String {
    format!("{:.2}", ns.into() / 1000.0)
}

fn pct(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

impl Display for Analysis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.report())
    }
}

impl Analysis {
    /// The plain-text report; times in microseconds since the first dispatch.
    pub fn report(&self) -> String {
        let mut o = String::new();
        let span = self.span_ns as f64;
        let _ = writeln!(o, "cusync trace: {}", self.label);
        let _ = writeln!(
            o,
            "device {}, {} SMs{}, at most {} CTA slot(s) per SM; {} tiles in {} stage(s); span {} us (first dispatch to last end)",
            self.device,
            self.sm_count,
            if self.sm_count_known { "" } else { " (inferred: max SM id + 1)" },
            self.slots_per_sm,
            self.tiles,
            self.stages.len(),
            us(span)
        );
        if !self.stages_without_events.is_empty() {
            let _ = writeln!(
                o,
                "stages with no tiles traced: {}",
                self.stages_without_events.join(", ")
            );
        }
        let _ = writeln!(
            o,
            "SM busy {} (a main loop running, [t_start, t_end)); occupied {} (a tile held, [t_dispatch, t_end)); held but idle {}",
            pct(self.busy_fraction),
            pct(self.occupied_fraction),
            pct(self.occupied_fraction - self.busy_fraction)
        );
        let _ = writeln!(
            o,
            "dispatch rounds per SM (achieved waves), all stages: min {}, mean {:.2}, max {} (over {} SMs that ran tiles)",
            self.rounds.min, self.rounds.mean, self.rounds.max, self.rounds.sms_used
        );

        let _ = writeln!(
            o,
            "\nper stage (tile time = t_end - t_start, wait = t_ready - t_dispatch; us):"
        );
        let _ = writeln!(
            o,
            "  {:<18} {:>6} {:>6} {:>6} {:>11} {:>9} {:>9} {:>9} {:>10} {:>8} {:>9}",
            "stage", "tiles", "blk/SM", "waves", "rounds", "tile mean", "median", "max", "wait total", "mean", "waited"
        );
        for s in &self.stages {
            let name = format!("{} {}", s.id, s.name);
            let _ = writeln!(
                o,
                "  {:<18} {:>6} {:>6} {:>6.2} {:>11} {:>9} {:>9} {:>9} {:>10} {:>8} {:>9}",
                name,
                s.tiles,
                format!("{}{}", s.blocks_per_sm, if s.blocks_per_sm_observed { "*" } else { "" }),
                s.waves,
                format!("{}/{:.2}", s.rounds.max, s.rounds.mean),
                us(s.tile_time.mean_ns),
                us(s.tile_time.median_ns),
                us(s.tile_time.max_ns as f64),
                us(s.wait.total_ns as f64),
                us(s.wait.mean_ns),
                format!("{}/{}", s.waited_tiles, s.tiles)
            );
            let ends: Vec<String> = s.wave_ends_ns.iter().map(|&t| us(t as f64)).collect();
            let _ = write!(
                o,
                "    {} whole wave(s), ending at {} us",
                s.whole_waves,
                ends.join(", ")
            );
            match s.grid_tiles {
                Some(g) if g != s.tiles => {
                    let _ = write!(o, "; WARNING: the grid has {g} tiles, the trace {}", s.tiles);
                }
                _ => {}
            }
            let _ = writeln!(o);
            let l = &s.lead_ins;
            if l.first.count > 0 {
                let later = if l.later.count > 0 {
                    format!(
                        "; later tiles median {} us, max {} us ({} tiles)",
                        us(l.later.median_ns),
                        us(l.later.max_ns as f64),
                        l.later.count
                    )
                } else {
                    String::new()
                };
                let _ = writeln!(
                    o,
                    "    dispatch -> main loop: each CTA's first tile median {} us, max {} us ({} CTAs){later}",
                    us(l.first.median_ns),
                    us(l.first.max_ns as f64),
                    l.first.count
                );
            }
            let b = &s.between;
            if b.pairs > 0 {
                let _ = writeln!(
                    o,
                    "    between a CTA's tiles ({} pairs): gap median {} us, max {} us (posted -> next first data); next taken {} us before the previous ended",
                    b.pairs,
                    us(b.gap_median_ns),
                    us(b.gap_max_ns as f64),
                    us(b.lead_median_ns)
                );
            }
            let slow = &s.slow_sms;
            if slow.widespread() {
                let _ = writeln!(o, "    {}", slow.summary().unwrap_or_default());
            } else if !slow.sms.is_empty() {
                let shown: Vec<String> = slow
                    .sms
                    .iter()
                    .take(SLOW_SMS_SHOWN)
                    .map(|x| format!("{} ({:+.0}%)", x.sm, (x.ratio - 1.0) * 100.0))
                    .collect();
                let more = slow.sms.len().saturating_sub(SLOW_SMS_SHOWN);
                let _ = writeln!(
                    o,
                    "    slow SMs ({}, tiles >= {:.2}x the median on average): {}{}; the stage ends {} us after its last tile on the other SMs",
                    slow.sms.len(),
                    SLOW_SM_FACTOR,
                    shown.join(", "),
                    if more > 0 { format!(", {more} more") } else { String::new() },
                    us(slow.tail_ns as f64)
                );
            }
        }
        if self.stages.iter().any(|s| s.blocks_per_sm_observed) {
            let _ = writeln!(
                o,
                "  * blocks per SM not in the metadata: the most tiles of the stage seen together on one SM"
            );
        }
        let _ = writeln!(
            o,
            "  waves = tiles / (blocks per SM * SMs); rounds = max/mean tiles run back to back in one CTA slot"
        );

        if !self.tails.is_empty() {
            let _ = writeln!(o, "\ntails (last producer tile end -> last consumer tile end):");
            for t in &self.tails {
                let _ = writeln!(
                    o,
                    "  stage {} -> {}: {} us ({} of the span), SM busy {} inside it",
                    t.producer,
                    t.consumer,
                    us(t.tail_ns as f64),
                    pct(t.tail_ns as f64 / span.max(1.0)),
                    pct(t.busy_fraction)
                );
            }
        }

        let cp = &self.critical_path;
        let _ = writeln!(
            o,
            "\ncritical path (approximate: rebuilt from times via SM slots and the previous stage's posts):"
        );
        let _ = writeln!(
            o,
            "  {} tiles; main loops {} us + latency {} us = {} us; {} slot edge(s), {} dependency edge(s)",
            cp.steps.len(),
            us(cp.work_ns as f64),
            us(cp.latency_ns as f64),
            us((cp.work_ns + cp.latency_ns) as f64),
            cp.slot_edges,
            cp.dependency_edges
        );
        let n = cp.steps.len();
        for (k, st) in cp.steps.iter().enumerate() {
            if n > PATH_HEAD + PATH_TAIL && k == PATH_HEAD {
                let _ = writeln!(o, "    ... {} more ...", n - PATH_HEAD - PATH_TAIL);
            }
            if n > PATH_HEAD + PATH_TAIL && k >= PATH_HEAD && k < n - PATH_TAIL {
                continue;
            }
            let via = match st.via {
                Edge::Start => "first",
                Edge::Slot => "after slot",
                Edge::Dependency => "after dependency",
            };
            let stage = self
                .stages
                .iter()
                .find(|s| s.id == st.stage)
                .map_or_else(|| st.stage.to_string(), |s| s.name.clone());
            let _ = writeln!(
                o,
                "    {:<12} tile {:<5} SM {:>3}.{:<2} [{:>9}, {:>9}] us  {:<16} latency {:>8} us",
                stage,
                st.tile,
                st.sm,
                st.slot,
                us(st.start_ns as f64),
                us(st.end_ns as f64),
                via,
                us(st.latency_ns as f64)
            );
        }

        if let Some(b) = self.timeline.first() {
            let _ = writeln!(
                o,
                "\nSMs over time ({} buckets of about {} us; '#' busy, '+' occupied but idle):",
                self.timeline.len(),
                us((b.end_ns - b.start_ns) as f64)
            );
            for b in &self.timeline {
                let busy = (b.busy * BAR as f64).round() as usize;
                let occ = ((b.occupied * BAR as f64).round() as usize).clamp(busy, BAR);
                let _ = writeln!(
                    o,
                    "  {:>9} - {:>9} us  busy {:>6}  occupied {:>6}  |{}{}{}|",
                    us(b.start_ns as f64),
                    us(b.end_ns as f64),
                    pct(b.busy),
                    pct(b.occupied),
                    "#".repeat(busy),
                    "+".repeat(occ - busy),
                    " ".repeat(BAR - occ)
                );
            }
        }
        o
    }
}
