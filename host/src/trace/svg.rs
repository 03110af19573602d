//! The SVG timeline: one row per SM (per CTA slot where co-resident CTAs overlap), written by
//! hand (no plotting dependency: rows, hatch patterns, tooltips and classes are simpler to say
//! directly than through a chart library, and the output stays small and testable).
//!
//! What it shows, top to bottom:
//!
//! * a title (the run label) and a line of headline numbers (span, busy, tail, waves);
//! * a legend: one colour per stage, the hatched wait, the wave-end line, the tail;
//! * the rows: each tile's main loop `[t_start, t_end]` as a rectangle in its stage's colour
//!   (`class="tile"`, exactly one per tile, with a hover tooltip), its wait
//!   `[t_dispatch, t_ready]` as a lighter hatched rectangle (`class="wait"`, only when non-empty);
//!   alternate SMs shaded; time runs left to right in microseconds since the first dispatch;
//! * wave boundaries: a dashed vertical line in a stage's colour where its `k`-th wave ends,
//!   labelled `w1`, `w2`, ... above the rows (a wave is `blocks per SM * SMs` of the stage's
//!   tiles in dispatch order; see [`super::analysis`]);
//! * the time axis, and under it the tail of each stage pair as a bracket;
//! * a strip with the SM busy (dark) and occupied (light) fractions over time.

use std::fmt::Write as _;

use crate::shared::layout::TraceEvent;
use crate::Result;

use super::analysis::{analyze, Analysis, AnalysisOptions};
use super::model::Trace;
use super::slots::Slots;

/// Stage colours (Tableau 10), cycled.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
];

/// How to draw the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SvgOptions {
    /// Width of the image in pixels.
    pub width: u32,
    /// Height available to the SM rows; rows get 2 to 22 pixels each within it.
    pub rows_height: u32,
    /// Buckets of the busy strip.
    pub buckets: usize,
}

impl Default for SvgOptions {
    fn default() -> Self {
        Self {
            width: 1400,
            rows_height: 620,
            buckets: 200,
        }
    }
}

impl Trace {
    /// The SVG timeline of this trace (see [`super::svg`]); an empty trace is an error.
    pub fn to_svg(&self, options: &SvgOptions) -> Result<String> {
        let analysis = analyze(
            self,
            &AnalysisOptions {
                buckets: options.buckets,
            },
        )?;
        Ok(render(self, &analysis, options))
    }
}

/// Draws `trace` with its `analysis` (which must be of this trace; its timeline is the busy
/// strip).
pub fn render(trace: &Trace, analysis: &Analysis, options: &SvgOptions) -> String {
    let t0 = analysis.t0_ns;
    let rel: Vec<TraceEvent> = trace
        .events
        .iter()
        .map(|e| TraceEvent {
            t_dispatch: e.t_dispatch.saturating_sub(t0),
            t_ready: e.t_ready.saturating_sub(t0),
            t_start: e.t_start.saturating_sub(t0),
            t_end: e.t_end.saturating_sub(t0),
            ..*e
        })
        .collect();
    let sms = analysis.sm_count.max(1);
    let slots = Slots::assign(&rel, sms);
    let per_sm = slots.max_per_sm().max(1);
    let stage_ids = trace.stage_ids();
    let colour = |stage: u32| PALETTE[stage_ids.iter().position(|&s| s == stage).unwrap_or(0) % PALETTE.len()];

    // Geometry.
    let width = f64::from(options.width.max(400));
    let (left, right) = (78.0, 24.0);
    let plot_w = width - left - right;
    let rows = f64::from(sms * per_sm);
    let row_h = (f64::from(options.rows_height) / rows).floor().clamp(2.0, 22.0);
    // Dense timelines (rows under 5 px) drop the gap between SMs and the tiles' outlines.
    let gap = if per_sm > 1 && row_h >= 5.0 { 2.0 } else { 0.0 };
    let outline = if row_h >= 5.0 {
        "stroke:#fff;stroke-width:0.5"
    } else {
        "stroke:none"
    };
    let group_h = row_h * f64::from(per_sm) + gap;
    let label_rows = analysis.stages.len().clamp(1, 4) as f64;
    let plot_top = 88.0 + 13.0 * label_rows;
    let plot_bottom = plot_top + group_h * f64::from(sms);
    let axis_y = plot_bottom;
    let tail_y = axis_y + 52.0;
    let strip_top = tail_y + 16.0 + 18.0 * analysis.tails.len().min(3) as f64;
    let strip_h = 60.0;
    let height = strip_top + strip_h + 22.0;
    let span = analysis.span_ns.max(1) as f64;
    let x = |t: u64| left + t as f64 / span * plot_w;
    let row_y = |sm: u32, slot: u32| plot_top + f64::from(sm) * group_h + f64::from(slot) * row_h;

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h:.0}" viewBox="0 0 {w} {h:.0}" font-family="Helvetica, Arial, sans-serif">
<style>.tile{{{outline}}} .axis{{font-size:11px;fill:#333}} .small{{font-size:10px}}</style>"#,
        w = width,
        h = height
    );
    // Hatch patterns, one per stage.
    let _ = writeln!(o, "<defs>");
    for &s in &stage_ids {
        let c = colour(s);
        let _ = writeln!(
            o,
            r#"<pattern id="hatch{s}" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="5" height="5" fill="{c}" fill-opacity="0.22"/><line x1="0" y1="0" x2="0" y2="5" stroke="{c}" stroke-width="1.6" stroke-opacity="0.8"/></pattern>"#
        );
    }
    let _ = writeln!(o, "</defs>");
    let _ = writeln!(o, r##"<rect width="100%" height="100%" fill="#fff"/>"##);

    header(&mut o, trace, analysis, &stage_ids, &colour, left);

    // Alternate SM shading and slot separators.
    for sm in 0..sms {
        let y = row_y(sm, 0);
        if sm % 2 == 1 {
            let _ = writeln!(
                o,
                r##"<rect x="{left}" y="{y:.1}" width="{plot_w:.1}" height="{:.1}" fill="#f0f0f0"/>"##,
                group_h
            );
        }
    }
    // Time grid.
    let step = nice_step(span / 1000.0 / 10.0);
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    let ticks: Vec<f64> = (0..)
        .map(|k| f64::from(k) * step)
        .take_while(|&t| t * 1000.0 <= span + 1e-6)
        .collect();
    for &t in &ticks {
        let tx = x((t * 1000.0) as u64);
        let _ = writeln!(
            o,
            r##"<line x1="{tx:.1}" y1="{plot_top:.1}" x2="{tx:.1}" y2="{plot_bottom:.1}" stroke="#d8d8d8" stroke-width="0.8"/>"##
        );
    }
    // Tails, as light bands behind the tiles.
    for t in analysis.tails.iter().filter(|t| t.tail_ns > 0) {
        let (a, b) = (x(t.producer_end_ns), x(t.consumer_end_ns));
        let _ = writeln!(
            o,
            r##"<rect x="{a:.1}" y="{plot_top:.1}" width="{:.1}" height="{:.1}" fill="#f2c12e" fill-opacity="0.16"/>"##,
            b - a,
            plot_bottom - plot_top
        );
    }

    // Waits, then tiles.
    let inset = if row_h >= 6.0 { 1.0 } else { 0.0 };
    let bar_h = row_h - 2.0 * inset;
    for (i, e) in rel.iter().enumerate() {
        if e.t_ready > e.t_dispatch {
            let (a, b) = (x(e.t_dispatch), x(e.t_ready));
            let _ = writeln!(
                o,
                r#"<rect class="wait" x="{a:.1}" y="{:.1}" width="{:.1}" height="{bar_h:.1}" fill="url(#hatch{})"/>"#,
                row_y(e.sm, slots.slot[i]) + inset,
                (b - a).max(0.5),
                e.stage
            );
        }
    }
    for (i, e) in rel.iter().enumerate() {
        let (a, b) = (x(e.t_start), x(e.t_end));
        let name = escape(&trace.stage_name(e.stage));
        let _ = writeln!(
            o,
            r#"<rect class="tile" x="{a:.1}" y="{:.1}" width="{:.1}" height="{bar_h:.1}" fill="{}"><title>{name} tile {} on SM {} (slot {}, cta {}): dispatch {} ready {} start {} end {} µs</title></rect>"#,
            row_y(e.sm, slots.slot[i]) + inset,
            (b - a).max(0.5),
            colour(e.stage),
            e.tile,
            e.sm,
            slots.slot[i],
            e.cta,
            us(e.t_dispatch),
            us(e.t_ready),
            us(e.t_start),
            us(e.t_end)
        );
    }

    // Wave ends: dashed lines and labels above the rows, one label row per stage.
    for (k, s) in analysis.stages.iter().enumerate() {
        let c = colour(s.id);
        let label_y = plot_top - 6.0 - 13.0 * (label_rows - 1.0 - (k as f64).min(label_rows - 1.0));
        let mut last_label = f64::NEG_INFINITY;
        for (w, &end) in s.wave_ends_ns.iter().enumerate() {
            let wx = x(end);
            let _ = writeln!(
                o,
                r#"<line x1="{wx:.1}" y1="{:.1}" x2="{wx:.1}" y2="{plot_bottom:.1}" stroke="{c}" stroke-width="1.4" stroke-dasharray="5 3"/>"#,
                label_y + 2.0
            );
            if wx - last_label >= 18.0 {
                let _ = writeln!(
                    o,
                    r#"<text class="small" x="{wx:.1}" y="{label_y:.1}" text-anchor="middle" fill="{c}" font-weight="bold">w{}</text>"#,
                    w + 1
                );
                last_label = wx;
            }
        }
    }

    // SM labels.
    let every = [1u32, 2, 4, 5, 10, 20, 25, 50, 100]
        .into_iter()
        .find(|&k| group_h * f64::from(k) >= 11.0)
        .unwrap_or(100);
    let font = (group_h * f64::from(every) - 1.0).clamp(7.0, 11.0);
    for sm in (0..sms).step_by(every as usize) {
        let y = row_y(sm, 0) + (group_h - gap) / 2.0 + font * 0.35;
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{y:.1}" text-anchor="end" font-size="{font:.0}" fill="#333">SM {sm}</text>"##,
            left - 6.0
        );
    }
    let _ = writeln!(
        o,
        r##"<rect x="{left}" y="{plot_top:.1}" width="{plot_w:.1}" height="{:.1}" fill="none" stroke="#888" stroke-width="0.8"/>"##,
        plot_bottom - plot_top
    );

    // Time axis.
    for &t in &ticks {
        let tx = x((t * 1000.0) as u64);
        let _ = writeln!(
            o,
            r##"<line x1="{tx:.1}" y1="{axis_y:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#555"/><text class="axis" x="{tx:.1}" y="{:.1}" text-anchor="middle">{t:.decimals$}</text>"##,
            axis_y + 5.0,
            axis_y + 17.0
        );
    }
    let _ = writeln!(
        o,
        r#"<text class="axis" x="{:.1}" y="{:.1}" text-anchor="middle">time since first dispatch (µs)</text>"#,
        left + plot_w / 2.0,
        axis_y + 32.0
    );

    // Tails as brackets under the axis, labelled to their left (or right when there is no room).
    for (k, t) in analysis.tails.iter().take(3).enumerate() {
        let y = tail_y + 18.0 * k as f64;
        let (a, b) = (x(t.producer_end_ns), x(t.consumer_end_ns.max(t.producer_end_ns)));
        let name = |id: u32| escape(&trace.stage_name(id));
        let label = format!(
            "tail {} → {}: {} µs, SMs {:.0}% busy",
            name(t.producer),
            name(t.consumer),
            us_i(t.tail_ns),
            t.busy_fraction * 100.0
        );
        let room = a - left >= 6.0 * label.chars().count() as f64;
        let (lx, anchor) = if room { (a - 6.0, "end") } else { (b + 6.0, "start") };
        let _ = writeln!(
            o,
            r##"<path d="M{a:.1},{:.1} V{y:.1} H{b:.1} V{:.1}" fill="none" stroke="#444" stroke-width="1.2"/><text class="axis" x="{lx:.1}" y="{:.1}" text-anchor="{anchor}">{label}</text>"##,
            y - 6.0,
            y - 6.0,
            y + 1.0,
        );
    }

    busy_strip(&mut o, analysis, left, plot_w, strip_top, strip_h, &x);
    let _ = writeln!(o, "</svg>");
    o
}

/// Title, headline numbers and legend.
fn header(
    o: &mut String,
    trace: &Trace,
    a: &Analysis,
    stage_ids: &[u32],
    colour: &dyn Fn(u32) -> &'static str,
    left: f64,
) {
    let _ = writeln!(
        o,
        r##"<text x="{left}" y="26" font-size="18" font-weight="bold" fill="#111">{}</text>"##,
        escape(&a.label)
    );
    let tail = a
        .tails
        .first()
        .map(|t| format!(" · tail {} µs", us_i(t.tail_ns)))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        r##"<text x="{left}" y="46" font-size="12" fill="#444">{} · {} SMs × {} CTA slot(s) · {} tiles · span {} µs · SMs busy {:.1}% (occupied {:.1}%){tail} · dispatch rounds up to {}</text>"##,
        escape(&a.device),
        a.sm_count,
        a.slots_per_sm,
        a.tiles,
        us(a.span_ns),
        a.busy_fraction * 100.0,
        a.occupied_fraction * 100.0,
        a.rounds.max
    );
    // Legend: (swatch attributes, or None for a dashed line; text).
    let mut items: Vec<(Option<String>, String)> = Vec::new();
    for &s in stage_ids {
        let text = match a.stages.iter().find(|x| x.id == s) {
            Some(st) => format!(
                "{} ({} tiles, {:.2} waves)",
                escape(&trace.stage_name(s)),
                st.tiles,
                st.waves
            ),
            None => format!("{} (no tiles)", escape(&trace.stage_name(s))),
        };
        items.push((Some(format!(r#"fill="{}""#, colour(s))), text));
    }
    let waited = stage_ids
        .iter()
        .copied()
        .find(|&s| a.stages.iter().any(|x| x.id == s && x.waited_tiles > 0));
    let hatch = waited.or_else(|| stage_ids.last().copied()).unwrap_or(0);
    items.push((
        Some(format!(
            r##"fill="url(#hatch{hatch})" stroke="#999" stroke-width="0.5""##
        )),
        "wait (dispatch → ready)".into(),
    ));
    items.push((None, "wN: a stage's N-th wave ends".into()));
    if !a.tails.is_empty() {
        items.push((Some(r##"fill="#f2c12e" fill-opacity="0.3""##.into()), "tail".into()));
    }
    let (mut lx, ly) = (left, 64.0);
    for (swatch, text) in items {
        match swatch {
            Some(attrs) => {
                let _ = write!(o, r#"<rect x="{lx:.1}" y="{ly}" width="13" height="12" {attrs}/>"#);
            }
            None => {
                let _ = write!(
                    o,
                    r##"<line x1="{0:.1}" y1="{ly}" x2="{0:.1}" y2="{1:.1}" stroke="#555" stroke-width="1.4" stroke-dasharray="4 2"/>"##,
                    lx + 6.5,
                    ly + 12.0
                );
            }
        }
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" fill="#222">{text}</text>"##,
            lx + 18.0,
            ly + 10.0
        );
        lx += 18.0 + 6.6 * text.chars().count() as f64 + 18.0;
    }
}

/// The busy/occupied strip under the timeline.
fn busy_strip(o: &mut String, a: &Analysis, left: f64, plot_w: f64, top: f64, h: f64, x: &dyn Fn(u64) -> f64) {
    let _ = writeln!(
        o,
        r##"<text class="axis" x="{left}" y="{:.1}">SMs busy (dark: a main loop runs) and occupied (light: a tile is held, waits included), % of SMs</text>"##,
        top - 5.0
    );
    let _ = writeln!(
        o,
        r##"<rect x="{left}" y="{top:.1}" width="{plot_w:.1}" height="{h}" fill="#fafafa" stroke="#888" stroke-width="0.8"/>"##
    );
    for (frac, fill) in [(true, "#c9c9c9"), (false, "#555")] {
        let mut d = format!("M{left:.1},{:.1}", top + h);
        for b in &a.timeline {
            let v = if frac { b.occupied } else { b.busy };
            let y = top + h - v.clamp(0.0, 1.0) * h;
            let _ = write!(d, " L{:.1},{y:.1} L{:.1},{y:.1}", x(b.start_ns), x(b.end_ns));
        }
        let _ = write!(d, " L{:.1},{:.1} Z", left + plot_w, top + h);
        let _ = writeln!(o, r#"<path d="{d}" fill="{fill}"/>"#);
    }
    for (v, label) in [(0.0, "0%"), (0.5, "50%"), (1.0, "100%")] {
        let y = top + h - v * h;
        let _ = writeln!(
            o,
            r##"<text class="small" x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{label}</text>"##,
            left - 6.0,
            y + 3.5
        );
    }
}

/// The smallest 1, 2 or 5 times a power of ten that is at least `raw` (and positive).
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * p)
}

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

fn us_i(ns: i64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

/// `s` with XML's special characters escaped.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}
