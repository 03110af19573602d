//! Per-wave analysis of a trace.
//!
//! Definitions (all times in ns since the first dispatch, `S` = SMs of the device):
//!
//! * **tile time** = `t_end - t_start` (main loop to posted); **wait** = `t_ready - t_dispatch`
//!   (a path-2 CTA's first tile is dispatched at the CTA's entry, plain or stream-mode, so its
//!   wait includes the block's setup).
//! * **blocks per SM** `o` of a stage: the metadata's, else the most tiles of that stage seen
//!   overlapping in `[t_dispatch, t_end)` on one SM.
//! * **waves** of a stage = `tiles / (o * S)` (fractional, as the CuSync paper prints them);
//!   whole waves = its ceiling. **Wave ends**: the stage's tiles in dispatch order (ties by
//!   tile id) cut into chunks of `o * S`; wave `k` ends at the latest `t_end` of chunk `k`.
//! * **dispatch rounds** (achieved waves) of an SM: the most tiles that ran one after another
//!   in one of its CTA slots ([`super::slots`]); per stage, counting only that stage's tiles.
//!   Reported as min / mean / max over the SMs that ran at least one such tile.
//! * **busy / occupied** fractions: see [`super::busy`].
//! * **tail** of a producer -> consumer pair (consecutive stages in id order that have tiles):
//!   last consumer `t_end` minus last producer `t_end` (negative when the consumer finished
//!   first), with the SM busy fraction inside it.
//! * **critical path**: see [`super::critical`].
//! * **between tiles** of a stage: over each pair of consecutive tiles one CTA ran (same stage
//!   and block, one after the other in its slot), the **gap** `next.t_start - prev.t_end` (the
//!   CTA's main loop idle between its tiles: the next tile's first data landed that long after
//!   the previous tile was posted; negative when the post is stamped after the next tile began)
//!   and the **lead** `prev.t_end - next.t_dispatch` (how long before the previous tile ended
//!   the next one was taken: a warp-specialized producer's head start). Medians.
//! * **lead-ins** of a stage: `t_start - t_dispatch` (dispatch to the main loop's first data),
//!   of each CTA's first tile of the stage (the CTA's set-up, and the first tile of a kernel
//!   whose SMs last ran another function fetches its code cold: about 6 µs more at the GPT-3
//!   MLP's B = 1 on an H100, docs/perf-notes.md, session 40) apart from its later tiles (a
//!   warp-specialized producer's hand-over). Medians and maxima.
//! * **slow SMs** of a stage (with at least [`SLOW_SM_MIN_TILES`] tiles): the SMs whose tiles of
//!   the stage took, on average, at least [`SLOW_SM_FACTOR`] times the stage's median tile time;
//!   with their **tail**: the stage's last `t_end` minus the last `t_end` of its tiles on the
//!   other SMs (how much later the stage ended because of them; 0 when another SM ended last).
//!   When more than a quarter of the SMs qualify, the tiles' work differs (stream-K ranges, edge
//!   tiles, waits) and the reports say the times vary instead of naming SMs.
//!   On the H200 a memory-bound stage's tiles on a dozen SMs take 20% longer whatever tile they
//!   hold (docs/perf-notes.md, session 27): this names them.

use std::collections::HashMap;

use crate::shared::layout::TraceEvent;
use crate::{Error, Result};

use super::busy::{SmCoverage, TimelineBucket};
use super::critical::CriticalPath;
use super::model::Trace;
use super::slots::Slots;

/// An SM is slow in a stage when its tiles' mean time is at least this times the stage's median.
pub const SLOW_SM_FACTOR: f64 = 1.10;

/// Fewest tiles a stage needs before its slow SMs are looked for.
pub const SLOW_SM_MIN_TILES: u32 = 8;

/// An SM whose tiles of a stage ran slow (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowSm {
    /// SM id.
    pub sm: u32,
    /// Tiles of the stage it ran.
    pub tiles: u32,
    /// Their mean tile time over the stage's median tile time.
    pub ratio: f64,
}

/// The slow SMs of a stage (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlowSms {
    /// Slowest first (by `ratio`, then SM id).
    pub sms: Vec<SlowSm>,
    /// The stage's last end minus the last end of its tiles on the other SMs, ns (0 when none
    /// is slow or another SM ended last).
    pub tail_ns: u64,
    /// SMs that ran a tile of the stage (0 below [`SLOW_SM_MIN_TILES`] tiles, where none is judged).
    pub sms_used: u32,
}

impl SlowSms {
    /// The slow SMs among one stage's `events` (absolute or relative times alike).
    pub fn of_events(events: &[TraceEvent]) -> Self {
        Self::of(events.iter())
    }

    /// One line for a report: how many SMs, their range over the median, the tail; `None`
    /// when no SM is slow.
    pub fn summary(&self) -> Option<String> {
        let (first, last) = (self.sms.first()?, self.sms.last()?);
        if self.widespread() {
            return Some(format!(
                "tile times vary widely ({} of {} SMs at >= {SLOW_SM_FACTOR:.2}x the median)",
                self.sms.len(),
                self.sms_used
            ));
        }
        Some(format!(
            "slow SMs {} ({:+.0}% to {:+.0}% over the median tile), tail {:.1} us",
            self.sms.len(),
            (last.ratio - 1.0) * 100.0,
            (first.ratio - 1.0) * 100.0,
            self.tail_ns as f64 / 1e3
        ))
    }

    /// Whether more than a quarter of the SMs are "slow": then the tiles' work differs (stream-K
    /// ranges, edge tiles, waits inside the main loop) and no SM stands out, so the reports say
    /// that instead of naming them.
    pub fn widespread(&self) -> bool {
        4 * self.sms.len() as u32 > self.sms_used
    }

    /// The slow SMs among `events` (one stage's, relative times); none below
    /// [`SLOW_SM_MIN_TILES`] tiles.
    fn of<'a>(events: impl Iterator<Item = &'a TraceEvent>) -> Self {
        // One pass: every tile time (for the median) and, per SM, (tiles, total time, last
        // end). Saturating: `of_events` takes unvalidated events (a traced launch's, straight
        // from the GPU), where a torn record must not panic.
        let mut times = Vec::new();
        let mut per_sm: HashMap<u32, (u32, u64, u64)> = HashMap::new();
        for e in events {
            let time = e.t_end.saturating_sub(e.t_start);
            times.push(time);
            let s = per_sm.entry(e.sm).or_default();
            s.0 += 1;
            s.1 += time;
            s.2 = s.2.max(e.t_end);
        }
        if (times.len() as u32) < SLOW_SM_MIN_TILES {
            return Self::default();
        }
        let median = Stats::of(times).median_ns;
        let ratio = |tiles: u32, total: u64| {
            if median > 0.0 {
                total as f64 / f64::from(tiles) / median
            } else {
                1.0
            }
        };
        let (mut sms, mut last, mut last_other) = (Vec::new(), 0, None::<u64>);
        for (&sm, &(tiles, total, end)) in &per_sm {
            last = last.max(end);
            let r = ratio(tiles, total);
            if r >= SLOW_SM_FACTOR {
                sms.push(SlowSm { sm, tiles, ratio: r });
            } else {
                last_other = Some(last_other.map_or(end, |o| o.max(end)));
            }
        }
        sms.sort_by(|a, b| b.ratio.total_cmp(&a.ratio).then(a.sm.cmp(&b.sm)));
        let tail_ns = match last_other {
            Some(o) if !sms.is_empty() => last.saturating_sub(o),
            _ => 0,
        };
        Self {
            sms,
            tail_ns,
            sms_used: per_sm.len() as u32,
        }
    }
}

/// How to analyse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnalysisOptions {
    /// Buckets of the busy/occupied timeline.
    pub buckets: usize,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        Self { buckets: 20 }
    }
}

/// Summary statistics of a set of durations (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// How many values.
    pub count: u32,
    /// Their sum.
    pub total_ns: u64,
    /// Their mean (0 when empty).
    pub mean_ns: f64,
    /// Their median (mean of the two middle values for an even count; 0 when empty).
    pub median_ns: f64,
    /// The smallest (0 when empty).
    pub min_ns: u64,
    /// The largest (0 when empty).
    pub max_ns: u64,
}

impl Stats {
    /// The statistics of `values`.
    pub fn of(mut values: Vec<u64>) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        values.sort_unstable();
        let n = values.len();
        let total: u64 = values.iter().sum();
        Self {
            count: n as u32,
            total_ns: total,
            mean_ns: total as f64 / n as f64,
            median_ns: median_of_sorted(&values, |v| v as f64),
            min_ns: values[0],
            max_ns: values[n - 1],
        }
    }
}

/// Dispatch rounds per SM (see the module docs), over the SMs that ran a tile.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rounds {
    /// SMs that ran at least one tile.
    pub sms_used: u32,
    /// Fewest rounds on a used SM.
    pub min: u32,
    /// Mean rounds over used SMs.
    pub mean: f64,
    /// Most rounds on an SM: the achieved number of waves.
    pub max: u32,
}

impl Rounds {
    fn of(per_sm: impl Iterator<Item = u32>) -> Self {
        let used: Vec<u32> = per_sm.filter(|&r| r > 0).collect();
        if used.is_empty() {
            return Self::default();
        }
        Self {
            sms_used: used.len() as u32,
            min: used.iter().copied().min().unwrap_or(0),
            mean: used.iter().map(|&r| f64::from(r)).sum::<f64>() / used.len() as f64,
            max: used.iter().copied().max().unwrap_or(0),
        }
    }
}

/// What one stage did.
#[derive(Clone, Debug, PartialEq)]
pub struct StageStats {
    /// Stage id.
    pub id: u32,
    /// Stage name.
    pub name: String,
    /// Tiles traced.
    pub tiles: u32,
    /// Tiles in the stage's grid, when the metadata has it (differs from `tiles` when the
    /// trace is incomplete).
    pub grid_tiles: Option<u32>,
    /// Blocks per SM used for the waves.
    pub blocks_per_sm: u32,
    /// Whether `blocks_per_sm` was observed (no metadata) rather than given.
    pub blocks_per_sm_observed: bool,
    /// `tiles / (blocks_per_sm * SMs)`.
    pub waves: f64,
    /// `ceil(waves)`.
    pub whole_waves: u32,
    /// End of each wave (see the module docs), ns.
    pub wave_ends_ns: Vec<u64>,
    /// Tile times `t_end - t_start`.
    pub tile_time: Stats,
    /// Waits `t_ready - t_dispatch`.
    pub wait: Stats,
    /// Tiles with a non-zero wait.
    pub waited_tiles: u32,
    /// First dispatch of the stage, ns.
    pub first_dispatch_ns: u64,
    /// Last end of the stage, ns.
    pub last_end_ns: u64,
    /// Dispatch rounds of this stage's tiles per SM.
    pub rounds: Rounds,
    /// From one tile of a CTA to its next.
    pub between: BetweenTiles,
    /// SMs whose tiles of this stage ran slow, and what they cost at the stage's end.
    pub slow_sms: SlowSms,
    /// Lead-ins (`t_start - t_dispatch`) of each CTA's first tile and of its later ones.
    pub lead_ins: LeadIns,
}

/// A stage's lead-ins, `t_start - t_dispatch` (see the module docs): of each CTA's first tile
/// of the stage, and of the tiles a CTA ran after one of the stage's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LeadIns {
    /// First tiles (one per CTA).
    pub first: Stats,
    /// Later tiles (none where every CTA ran one tile).
    pub later: Stats,
}

/// How a stage's CTAs went from one tile to the next (see the module docs), over the pairs of
/// consecutive tiles one CTA ran.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BetweenTiles {
    /// Pairs of consecutive tiles of one CTA (0: every CTA ran one tile).
    pub pairs: u32,
    /// Median `next.t_start - prev.t_end`, ns.
    pub gap_median_ns: f64,
    /// Largest `next.t_start - prev.t_end`, ns.
    pub gap_max_ns: i64,
    /// Median `prev.t_end - next.t_dispatch`, ns.
    pub lead_median_ns: f64,
}

impl BetweenTiles {
    /// The statistics of `(prev, next)` pairs of consecutive tiles of one CTA.
    fn of<'a>(pairs: impl Iterator<Item = (&'a TraceEvent, &'a TraceEvent)>) -> Self {
        let (mut gaps, mut leads): (Vec<i64>, Vec<i64>) = pairs
            .map(|(p, n)| (n.t_start as i64 - p.t_end as i64, p.t_end as i64 - n.t_dispatch as i64))
            .unzip();
        let Some(&gap_max) = gaps.iter().max() else {
            return Self::default();
        };
        gaps.sort_unstable();
        leads.sort_unstable();
        Self {
            pairs: gaps.len() as u32,
            gap_median_ns: median_of_sorted(&gaps, |v| v as f64),
            gap_max_ns: gap_max,
            lead_median_ns: median_of_sorted(&leads, |v| v as f64),
        }
    }
}

/// The median of the non-empty, sorted `values` as `f64` (the mean of the two middle ones for
/// an even count).
fn median_of_sorted<T: Copy>(values: &[T], to_f64: impl Fn(T) -> f64) -> f64 {
    let n = values.len();
    if n % 2 == 1 {
        to_f64(values[n / 2])
    } else {
        (to_f64(values[n / 2 - 1]) + to_f64(values[n / 2])) / 2.0
    }
}

/// The tail of a producer -> consumer stage pair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tail {
    /// Producer stage id.
    pub producer: u32,
    /// Consumer stage id (the next stage in id order).
    pub consumer: u32,
    /// Last producer `t_end`, ns.
    pub producer_end_ns: u64,
    /// Last consumer `t_end`, ns.
    pub consumer_end_ns: u64,
    /// `consumer_end_ns - producer_end_ns` (negative if the consumer finished first).
    pub tail_ns: i64,
    /// SM busy fraction inside the tail (0 when it is empty).
    pub busy_fraction: f64,
}

/// The analysis of a trace. Times are ns since the first dispatch.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// Run label.
    pub label: String,
    /// Device name.
    pub device: String,
    /// SMs (metadata, or inferred).
    pub sm_count: u32,
    /// Whether `sm_count` came from the metadata.
    pub sm_count_known: bool,
    /// Most CTA slots used on one SM.
    pub slots_per_sm: u32,
    /// Absolute time (`%globaltimer` ns) of the first dispatch.
    pub t0_ns: u64,
    /// First dispatch to last end.
    pub span_ns: u64,
    /// Tiles traced.
    pub tiles: u32,
    /// Per stage with at least one tile, in stage order.
    pub stages: Vec<StageStats>,
    /// Names of stages in the metadata with no tile in the trace.
    pub stages_without_events: Vec<String>,
    /// SM busy fraction over the span.
    pub busy_fraction: f64,
    /// SM occupied fraction over the span.
    pub occupied_fraction: f64,
    /// Busy and occupied fractions per time bucket.
    pub timeline: Vec<TimelineBucket>,
    /// Dispatch rounds per SM, all stages together.
    pub rounds: Rounds,
    /// Tails of consecutive stage pairs.
    pub tails: Vec<Tail>,
    /// The critical path.
    pub critical_path: CriticalPath,
}

/// Analyses `trace`. An empty or invalid trace is [`Error::InvalidArgument`].
pub fn analyze(trace: &Trace, options: &AnalysisOptions) -> Result<Analysis> {
    trace.validate()?;
    let Some(t0) = trace.t0() else {
        return Err(Error::InvalidArgument(
            "the trace has no tile events: nothing to analyse".into(),
        ));
    };
    let rel: Vec<TraceEvent> = trace
        .events
        .iter()
        .map(|e| TraceEvent {
            t_dispatch: e.t_dispatch - t0,
            t_ready: e.t_ready - t0,
            t_start: e.t_start - t0,
            t_end: e.t_end - t0,
            ..*e
        })
        .collect();
    let sms = trace.sm_count();
    let span = rel.iter().map(|e| e.t_end).max().unwrap_or(0);
    let slots = Slots::assign(&rel, sms);
    let coverage = SmCoverage::new(&rel, sms);
    let stage_ids = trace.stage_ids();

    let mut stages = Vec::new();
    let mut stages_without_events = Vec::new();
    for &id in &stage_ids {
        let idx: Vec<usize> = (0..rel.len()).filter(|&i| rel[i].stage == id).collect();
        if idx.is_empty() {
            stages_without_events.push(trace.stage_name(id));
        } else {
            stages.push(stage_stats(trace, id, &rel, &idx, &slots, sms));
        }
    }

    let tails = stages
        .windows(2)
        .map(|w| {
            let (pe, ce) = (w[0].last_end_ns, w[1].last_end_ns);
            Tail {
                producer: w[0].id,
                consumer: w[1].id,
                producer_end_ns: pe,
                consumer_end_ns: ce,
                tail_ns: ce as i64 - pe as i64,
                busy_fraction: coverage.fraction(pe, ce, false),
            }
        })
        .collect();

    let mut round_per_sm = vec![0u32; slots.per_sm.len()];
    for (e, &r) in rel.iter().zip(&slots.round) {
        round_per_sm[e.sm as usize] = round_per_sm[e.sm as usize].max(r);
    }

    Ok(Analysis {
        label: trace.label().to_string(),
        device: trace.device().to_string(),
        sm_count: sms,
        sm_count_known: trace.meta.sm_count.is_some(),
        slots_per_sm: slots.max_per_sm(),
        t0_ns: t0,
        span_ns: span,
        tiles: rel.len() as u32,
        stages,
        stages_without_events,
        busy_fraction: coverage.fraction(0, span, false),
        occupied_fraction: coverage.fraction(0, span, true),
        timeline: coverage.timeline(0, span, options.buckets),
        rounds: Rounds::of(round_per_sm.into_iter()),
        tails,
        critical_path: CriticalPath::compute(&rel, &slots, &stage_ids),
    })
}

/// Statistics of stage `id`, whose events (relative times) are `rel[idx]`.
fn stage_stats(trace: &Trace, id: u32, rel: &[TraceEvent], idx: &[usize], slots: &Slots, sms: u32) -> StageStats {
    let meta = trace.stage(id);
    // The tile one CTA ran before event `i`, of the same stage (its slot's previous tile, when
    // that is this CTA's): the between-tiles pairs and the later tiles' lead-ins.
    let cta_prev = |i: usize| slots.prev[i].filter(|&p| (rel[p].stage, rel[p].cta) == (rel[i].stage, rel[i].cta));
    let (blocks_per_sm, observed) = match meta.and_then(|m| m.blocks_per_sm) {
        Some(o) => (o, false),
        None => (max_overlap_per_sm(rel, idx), true),
    };
    let capacity = u64::from(blocks_per_sm) * u64::from(sms);
    let tiles = idx.len() as u32;

    let mut order = idx.to_vec();
    order.sort_by_key(|&i| (rel[i].t_dispatch, rel[i].tile));
    let wave_ends_ns = order
        .chunks(capacity.max(1) as usize)
        .map(|c| c.iter().map(|&i| rel[i].t_end).max().unwrap_or(0))
        .collect();

    // Per (SM, slot): this stage's tiles; per SM: the most in one slot.
    let mut per_slot: HashMap<(u32, u32), u32> = HashMap::new();
    for &i in idx {
        *per_slot.entry((rel[i].sm, slots.slot[i])).or_default() += 1;
    }
    let mut per_sm = vec![0u32; slots.per_sm.len()];
    for (&(sm, _), &n) in &per_slot {
        per_sm[sm as usize] = per_sm[sm as usize].max(n);
    }

    let waits: Vec<u64> = idx.iter().map(|&i| rel[i].t_ready - rel[i].t_dispatch).collect();
    StageStats {
        id,
        name: trace.stage_name(id),
        tiles,
        grid_tiles: meta.and_then(|m| m.grid).map(|g| g.count()),
        blocks_per_sm,
        blocks_per_sm_observed: observed,
        waves: if capacity == 0 {
            0.0
        } else {
            f64::from(tiles) / capacity as f64
        },
        whole_waves: if capacity == 0 {
            0
        } else {
            u64::from(tiles).div_ceil(capacity) as u32
        },
        wave_ends_ns,
        tile_time: Stats::of(idx.iter().map(|&i| rel[i].t_end - rel[i].t_start).collect()),
        waited_tiles: waits.iter().filter(|&&w| w > 0).count() as u32,
        wait: Stats::of(waits),
        first_dispatch_ns: idx.iter().map(|&i| rel[i].t_dispatch).min().unwrap_or(0),
        last_end_ns: idx.iter().map(|&i| rel[i].t_end).max().unwrap_or(0),
        rounds: Rounds::of(per_sm.into_iter()),
        between: BetweenTiles::of(idx.iter().filter_map(|&i| Some((&rel[cta_prev(i)?], &rel[i])))),
        slow_sms: SlowSms::of(idx.iter().map(|&i| &rel[i])),
        lead_ins: {
            // A tile with a previous tile of its CTA is a later one.
            let (later, first): (Vec<usize>, Vec<usize>) = idx.iter().partition(|&&i| cta_prev(i).is_some());
            let lead_in = |v: Vec<usize>| {
                Stats::of(
                    v.into_iter()
                        .map(|i| rel[i].t_start.saturating_sub(rel[i].t_dispatch))
                        .collect(),
                )
            };
            LeadIns {
                first: lead_in(first),
                later: lead_in(later),
            }
        },
    }
}

/// The most of `rel[idx]` overlapping in `[t_dispatch, t_end)` on one SM (at least 1).
fn max_overlap_per_sm(rel: &[TraceEvent], idx: &[usize]) -> u32 {
    let mut points: Vec<(u32, u64, i32)> = Vec::with_capacity(idx.len() * 2);
    for &i in idx {
        let e = &rel[i];
        if e.t_end > e.t_dispatch {
            points.push((e.sm, e.t_dispatch, 1));
            points.push((e.sm, e.t_end, -1));
        }
    }
    // Per SM by time, ends (-1) before starts (+1) at the same instant.
    points.sort_unstable();
    let (mut best, mut cur, mut sm) = (1, 0i32, None);
    for (s, _, delta) in points {
        if sm != Some(s) {
            sm = Some(s);
            cur = 0;
        }
        cur += delta;
        best = best.max(cur);
    }
    best as u32
}

impl Trace {
    /// [`analyze`] with the default options.
    pub fn analyze(&self) -> Result<Analysis> {
        analyze(self, &AnalysisOptions::default())
    }
}
