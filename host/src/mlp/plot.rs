//! An SVG bar chart of a sweep's speedups: per batch size, the best policy's speedup over
//! StreamSync and over cuBLAS (the faster of plain launches and the CUDA graph), with the 1.0x
//! line marked (above it cusync is faster).

use super::compare::MlpRow;
use std::fmt::Write;

const W: f64 = 900.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 70.0;

/// The chart as an SVG document (empty rows give an empty chart with a note).
pub fn speedup_svg(rows: &[MlpRow], device: &str) -> String {
    let series: Vec<(usize, f64, f64)> = rows
        .iter()
        .map(|r| {
            let best = r.best().map_or(f64::NAN, |b| b.1.median);
            let vs_ss = r.stream_sync_us.median / best;
            let vs_cublas = r.cublas_best_us() / best;
            (r.shape.batch, vs_ss, vs_cublas)
        })
        .collect();
    let max = series
        .iter()
        .flat_map(|s| [s.1, s.2])
        .filter(|v| v.is_finite())
        .fold(1.2f64, f64::max);
    let y_max = (max * 1.1 * 4.0).ceil() / 4.0;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let y = |v: f64| TOP + plot_h * (1.0 - v / y_max);
    let title = rows.first().map_or("MLP".to_string(), |r| r.shape.label());
    let mut o = String::new();
    let _ = writeln!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"##
    );
    let _ = writeln!(o, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        o,
        r##"<text x="{LEFT}" y="24" font-size="16" font-weight="bold">{title}: best cusync policy vs StreamSync and vs cuBLAS ({device})</text>"##
    );
    let _ = writeln!(
        o,
        r##"<text x="{LEFT}" y="42" fill="#555">speedup = baseline time / best policy time; above 1.0x cusync is faster</text>"##
    );
    // Axis, grid lines and labels.
    let mut tick = 0.0;
    while tick <= y_max + 1e-9 {
        let ty = y(tick);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{ty:.1}" x2="{:.1}" y2="{ty:.1}" stroke="#e5e5e5"/>"##,
            W - RIGHT
        );
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{tick:.2}x</text>"##,
            LEFT - 6.0,
            ty + 4.0
        );
        tick += 0.25;
    }
    let one = y(1.0);
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" y1="{one:.1}" x2="{:.1}" y2="{one:.1}" stroke="#000" stroke-dasharray="6 4"/>"##,
        W - RIGHT
    );
    if series.is_empty() {
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">no rows</text>"##,
            LEFT + plot_w / 2.0,
            TOP + plot_h / 2.0
        );
    }
    let group = plot_w / series.len().max(1) as f64;
    let bar = (group * 0.32).min(40.0);
    for (i, (batch, vs_ss, vs_cublas)) in series.iter().enumerate() {
        let cx = LEFT + group * (i as f64 + 0.5);
        for (k, (v, color, name)) in [
            (*vs_ss, "#4e79a7", "vs StreamSync"),
            (*vs_cublas, "#f28e2b", "vs cuBLAS"),
        ]
        .iter()
        .enumerate()
        {
            if !v.is_finite() {
                continue;
            }
            let x = cx - bar + k as f64 * bar;
            let top = y(v.min(y_max));
            let _ = writeln!(
                o,
                r##"<rect class="bar" x="{x:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>batch {batch}: {v:.3}x {name}</title></rect>"##,
                bar - 2.0,
                (y(0.0) - top).max(0.0)
            );
            let _ = writeln!(
                o,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{v:.2}</text>"##,
                x + bar / 2.0 - 1.0,
                top - 3.0
            );
        }
        let _ = writeln!(
            o,
            r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{batch}</text>"##,
            y(0.0) + 16.0
        );
    }
    let _ = writeln!(
        o,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">batch size</text>"##,
        LEFT + plot_w / 2.0,
        H - 28.0
    );
    let lx = W - RIGHT - 260.0;
    let _ = writeln!(
        o,
        r##"<rect x="{lx:.1}" y="50" width="12" height="12" fill="#4e79a7"/><text x="{:.1}" y="60">vs StreamSync (same kernels)</text>"##,
        lx + 16.0
    );
    let _ = writeln!(
        o,
        r##"<rect x="{lx:.1}" y="66" width="12" height="12" fill="#f28e2b"/><text x="{:.1}" y="76">vs cuBLAS back to back</text>"##,
        lx + 16.0
    );
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::microbench::Stats;
    use crate::mlp::MlpShape;
    use crate::ops::gemm::TileConfig;

    fn stats(v: f64) -> Stats {
        Stats {
            median: v,
            min: v,
            max: v,
            samples: 1,
        }
    }

    fn row(batch: usize, ss: f64, best: f64, cublas: f64) -> MlpRow {
        MlpRow {
            shape: MlpShape::gpt3(batch),
            tile: TileConfig::T128x128.into(),
            grids: [[1, 48, 1], [1, 96, 1]],
            blocks_per_sm: 1,
            waves: [0.36, 0.73],
            stream_sync_waves: 2,
            fine_waves: 2,
            stream_sync_us: stats(ss),
            policies: vec![("RowSync/row".into(), stats(best), false)],
            cublas_us: Some(stats(cublas)),
            cublas_graph_us: Some(stats(cublas * 1.2)),
            reference_error: 1e-3,
        }
    }

    #[test]
    fn one_bar_per_series_per_batch_with_the_speedups_in_their_titles() {
        let svg = speedup_svg(
            &[row(1, 220.0, 200.0, 100.0), row(256, 400.0, 320.0, 130.0)],
            "test GPU",
        );
        assert_eq!(svg.matches(r#"class="bar""#).count(), 4);
        assert!(svg.contains("batch 1: 1.100x vs StreamSync"), "{svg}");
        assert!(svg.contains("batch 256: 1.250x vs StreamSync"));
        assert!(svg.contains("batch 1: 0.500x vs cuBLAS"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // 4 bars, the background and 2 legend swatches; every bar element is closed.
        assert_eq!(svg.matches("<rect").count(), 7);
        assert_eq!(svg.matches("</rect>").count(), 4);
    }

    #[test]
    fn the_faster_cublas_variant_is_the_baseline_and_the_title_names_the_model() {
        let mut r = row(64, 220.0, 200.0, 100.0);
        r.cublas_graph_us = Some(stats(80.0));
        let svg = speedup_svg(&[r.clone()], "test GPU");
        assert!(svg.contains("batch 64: 0.400x vs cuBLAS"), "{svg}");
        assert!(svg.contains("GPT-3 (TP=8) MLP (H=12288, F=6144, bf16): best cusync policy"));
        // Without cuBLAS the bar is absent, not a panic.
        r.cublas_us = None;
        r.cublas_graph_us = None;
        assert!(r.cublas_best_us().is_nan());
        let _ = speedup_svg(&[r], "test GPU");
    }

    #[test]
    fn no_rows_is_an_empty_chart_not_a_panic() {
        assert!(speedup_svg(&[], "x").contains("no rows"));
    }
}
