//! An SVG bar chart of a sweep's speedups: per batch size, the best policy's speedup over
//! StreamSync and over cuBLAS (the faster of plain launches and the CUDA graph), with the 1.0x
//! line marked (above it cusync is faster).

use super::compare::MlpRow;
use crate::plot::{BarChart, Group, Series};

/// The chart as an SVG document (empty rows give an empty chart with a note).
pub fn speedup_svg(rows: &[MlpRow], device: &str) -> String {
    let title = rows.first().map_or("MLP".to_string(), |r| r.shape.label());
    let series = |name: &str, legend: &str, color: &str| Series {
        name: name.into(),
        legend: legend.into(),
        color: color.into(),
    };
    BarChart {
        title: format!("{title}: best cusync policy vs StreamSync and vs cuBLAS ({device})"),
        subtitle: "speedup = baseline time / best policy time; above 1.0x cusync is faster".into(),
        x_label: "batch size".into(),
        series: vec![
            series("vs StreamSync", "vs StreamSync (same kernels)", "#4e79a7"),
            series("vs cuBLAS", "vs cuBLAS back to back", "#f28e2b"),
        ],
        groups: rows
            .iter()
            .map(|r| {
                let best = r.best().map_or(f64::NAN, |b| b.stats.median);
                Group {
                    label: r.shape.batch.to_string(),
                    tip: format!("batch {}", r.shape.batch),
                    values: vec![r.stream_sync_us.median / best, r.cublas_best_us() / best],
                }
            })
            .collect(),
        reference: 1.0,
    }
    .to_svg()
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
            policies: vec![crate::mlp::compare::VariantTiming::new(
                cusync_shared::policy::PolicyKind::RowSync,
                crate::mlp::MlpOrder::RowMajor,
                crate::stream::WaitKernelPolicy::Auto,
                stats(best),
                false,
            )],
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
