//! The GeMM speed table of issue 3 (`cusync gemm-table`): path 2, path 1 and cuBLAS timed side
//! by side in one run on the same shapes, with TFLOP/s, the fraction of cuBLAS and the fraction
//! of the floor (the larger of FLOPs at [`PEAK_TFLOPS`] and bytes at [`PEAK_TBPS`]).

use super::gemm::{time_gemm, GemmConfig, TimingOptions};
use crate::baselines::cublas::time_cublas_gemm;
use crate::{Context, Result};
use std::fmt::Write;

/// The bf16 tensor-core rate the floor uses (measured by this workplace: 769–798 TFLOP/s).
pub const PEAK_TFLOPS: f64 = 790.0;
/// The memory bandwidth the floor uses (device-to-device copy, bytes read + written).
pub const PEAK_TBPS: f64 = 4.3;

/// One shape of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GemmCase {
    /// What it is ("8192^3", "GPT-3 MLP GeMM1 B=64").
    pub label: String,
    /// The problem (bf16 in and out, row-major operands, the epilogue of the layer).
    pub cfg: GemmConfig,
}

/// Issue 3's shapes: 8192^3, the GPT-3 MLP GeMMs for B in 1, 64, 256, 512, 1024, 2048
/// (GeMM1 with GeLU), and 16384 x 8192 x 8192.
pub fn issue3_cases() -> Vec<GemmCase> {
    use super::gemm::Epilogue;
    let mut v = vec![GemmCase {
        label: "8192^3".into(),
        cfg: GemmConfig::new(8192, 8192, 8192),
    }];
    for b in [1usize, 64, 256, 512, 1024, 2048] {
        v.push(GemmCase {
            label: format!("MLP GeMM1 B={b} (+GeLU)"),
            cfg: GemmConfig::new(b, 6144, 12288).epilogue(Epilogue::Gelu),
        });
        v.push(GemmCase {
            label: format!("MLP GeMM2 B={b}"),
            cfg: GemmConfig::new(b, 12288, 6144),
        });
    }
    v.push(GemmCase {
        label: "16384x8192x8192".into(),
        cfg: GemmConfig::new(16384, 8192, 8192),
    });
    v
}

/// The floor of a problem in ms: FLOPs at [`PEAK_TFLOPS`] or bytes (A, B and C once) at
/// [`PEAK_TBPS`], whichever is longer.
pub fn floor_ms(cfg: &GemmConfig) -> f64 {
    let flops_ms = cfg.flops() / (PEAK_TFLOPS * 1e12) * 1e3;
    let bytes = (cfg.a_len() * 2 + cfg.b_len() * 2 + cfg.c_len() * cfg.output.bytes()) as f64;
    let bytes_ms = bytes / (PEAK_TBPS * 1e12) * 1e3;
    flops_ms.max(bytes_ms)
}

/// One measured row.
#[derive(Clone, Debug)]
pub struct GemmRow {
    /// The case.
    pub case: GemmCase,
    /// Path 2 median (ms), when the device runs it (the skinny kernels switched off; where the
    /// 128 x 16 tile is the small-batch default, `gemm_sm90::choose_tile16`, that default).
    pub path2_ms: Option<f64>,
    /// The skinny kernels' median (ms), where they are the default on this device
    /// ([`super::gemm_skinny::choose_skinny`], and the 128 x 16 tile did not take their place).
    pub skinny_ms: Option<f64>,
    /// Path 1 median (ms).
    pub path1_ms: f64,
    /// cuBLAS median (ms), when libcublas loads.
    pub cublas_ms: Option<f64>,
}

/// Times every case (path 2, path 1, cuBLAS, in that order per case); `progress` is called
/// before each case with its label.
pub fn measure(
    cx: &Context,
    cases: &[GemmCase],
    opts: TimingOptions,
    mut progress: impl FnMut(&str),
) -> Result<Vec<GemmRow>> {
    let mut rows = Vec::new();
    for case in cases {
        progress(&case.label);
        // Where the 128 x 16 tile takes the skinny kernels' place (`choose_tile16`), path 2's
        // column times the default itself and the skinny kernels stay out of "ours".
        let tile16 = super::gemm_sm90::choose_tile16(&case.cfg, cx.info()).is_some();
        let path2_ms = if super::gemm_sm90::device_supports(cx) {
            let cfg = super::gemm_sm90::path2_default_config(&case.cfg, cx.info());
            Some(time_gemm(cx, &cfg, opts)?)
        } else {
            None
        };
        let skinny_ms = if super::gemm_skinny::is_default_for(&case.cfg) && !tile16 {
            Some(time_gemm(cx, &case.cfg.skinny(true), opts)?)
        } else {
            None
        };
        let path1_ms = time_gemm(cx, &case.cfg.path1_only(), opts)?;
        // cuBLAS has no GeLU epilogue here: it is timed on the plain product (a lower bound of
        // what a GeMM + GeLU costs it).
        let plain = case.cfg.epilogue(super::gemm::Epilogue::None);
        let cublas_ms = time_cublas_gemm(cx, &plain, opts).ok();
        rows.push(GemmRow {
            case: case.clone(),
            path2_ms,
            skinny_ms,
            path1_ms,
            cublas_ms,
        });
    }
    Ok(rows)
}

/// Path 2's tiles forced one by one on `cfg`: (tile name, median ms).
pub fn measure_path2_tiles(cx: &Context, cfg: &GemmConfig, opts: TimingOptions) -> Result<Vec<(&'static str, f64)>> {
    use super::gemm_sm90::WgTile;
    let mut v = Vec::new();
    if !super::gemm_sm90::device_supports(cx) {
        return Ok(v);
    }
    for t in [WgTile::T128x256, WgTile::T128x192, WgTile::T128x128] {
        v.push((t.name(), time_gemm(cx, &cfg.wg_tile(t).swap_ab(false), opts)?));
    }
    Ok(v)
}

/// Path 2 timed with split-K factors forced, beside the factor the heuristic picks.
#[derive(Clone, Debug)]
pub struct SplitTimes {
    /// The factor [`cusync_shared::gemm_sm90::choose_split_k`] picks for the case.
    pub chosen: u32,
    /// (forced factor, median ms).
    pub times: Vec<(u32, f64)>,
}

/// Path 2 on `cfg` with each split-K factor of `splits` forced (`None` where the device has
/// no path 2).
pub fn measure_path2_splits(
    cx: &Context,
    cfg: &GemmConfig,
    splits: &[u32],
    opts: TimingOptions,
) -> Result<Option<SplitTimes>> {
    if !super::gemm_sm90::device_supports(cx) {
        return Ok(None);
    }
    let chosen = super::gemm::Gemm::new(cx, *cfg)?
        .path2()
        .map_or(1, super::gemm_sm90::Sm90Gemm::split_k);
    let mut v = Vec::new();
    for &s in splits {
        v.push((s, time_gemm(cx, &cfg.split_k(s), opts)?));
    }
    Ok(Some(SplitTimes { chosen, times: v }))
}

/// Path 2's work decompositions timed side by side on `cfg`: the default (heuristic tile,
/// stream-K or split-K as chosen, described), then each tile with whole tiles only (no split,
/// no stream-K) and with stream-K forced (skipped where no plan exists), the small batches'
/// tiles, and the default on a shallower pipeline (depths 4 and 6 where its ring is deeper).
/// (label, median ms).
pub fn measure_path2_modes(cx: &Context, cfg: &GemmConfig, opts: TimingOptions) -> Result<Vec<(String, f64)>> {
    use super::gemm_sm90::WgTile;
    let mut v = Vec::new();
    if !super::gemm_sm90::device_supports(cx) {
        return Ok(v);
    }
    let g = super::gemm::Gemm::new(cx, *cfg)?;
    // The default is the skinny kernel where it is chosen (untraced launches), else path 2's.
    let what = match g.skinny() {
        Some(s) => format!("skinny `{}`", s.kernel_name()),
        None => g.path2().map_or("path 1".to_string(), describe_path2),
    };
    v.push((format!("default ({what})"), time_gemm(cx, cfg, opts)?));
    if g.skinny().is_none() && super::gemm_skinny::is_default_for(cfg) {
        // The 128 x 16 tile took the skinny kernels' place: them, beside it.
        v.push(("skinny (forced)".to_string(), time_gemm(cx, &cfg.skinny(true), opts)?));
    }
    for t in [WgTile::T128x256, WgTile::T128x192, WgTile::T128x128] {
        let dp = cfg.wg_tile(t).split_k(1).stream_k(false).cluster(false);
        v.push((format!("{} whole", t.name()), time_gemm(cx, &dp, opts)?));
        if t == WgTile::T128x256 && cfg.m > 128 && cfg.b_layout == super::gemm::Layout::RowMajor {
            let c2 = dp.cluster(true);
            v.push((
                format!("{} whole, clusters of 2 (B multicast)", t.name()),
                time_gemm(cx, &c2, opts)?,
            ));
        }
        let sk = cfg.wg_tile(t).stream_k(true);
        if super::gemm::Gemm::new(cx, sk)?
            .path2()
            .and_then(|k| k.stream_k())
            .is_some()
        {
            v.push((format!("{} stream-K", t.name()), time_gemm(cx, &sk, opts)?));
        }
    }
    if cfg.m <= 128 {
        // The skinny tile on the swapped product, each decomposition.
        let sw = cfg.wg_tile(WgTile::T128x64).swap_ab(true).cluster(false);
        for (label, c) in [
            ("whole", sw.split_k(1).stream_k(false)),
            ("split-K 2", sw.split_k(2)),
            ("split-K 3", sw.split_k(3)),
            ("stream-K", sw.stream_k(true)),
        ] {
            v.push((format!("128x64 swapped, {label}"), time_gemm(cx, &c, opts)?));
        }
        if cfg.m <= 16 {
            // The 16-column tile swapped (the default on the devices `choose_tile16` lists),
            // each decomposition, at the device's default depth.
            let sw16 = cfg.wg_tile(WgTile::T128x16).swap_ab(true).cluster(false);
            for (label, c) in [
                ("whole", sw16.split_k(1).stream_k(false)),
                ("split-K 2", sw16.split_k(2)),
                ("stream-K", sw16.stream_k(true)),
            ] {
                v.push((format!("128x16 swapped, {label}"), time_gemm(cx, &c, opts)?));
            }
        }
        // The 96-column tile unswapped (M <= 64; the default from 17 rows where its units fill
        // the SMs), whole and split in two.
        if cfg.m <= 64 {
            let t96 = cfg
                .wg_tile(WgTile::T64x96)
                .swap_ab(false)
                .cluster(false)
                .stream_k(false);
            for (label, c) in [("whole", t96.split_k(1)), ("split-K 2", t96.split_k(2))] {
                v.push((format!("64x96, {label}"), time_gemm(cx, &c, opts)?));
            }
        }
    }
    // The default's path-2 launches at other depths of its ring (`GemmConfig::pipeline_depth`;
    // `default_pipeline_depth` picks 5 or 6 of it for weight-streaming launches on the H100, 6
    // on the H200, at the batches measured there): 4, 6
    // and the whole ring, each where it is not the default's own.
    if let Some(k) = g.path2().filter(|_| g.skinny().is_none()) {
        let stages = k.tile().shape().stages;
        for depth in [4, 6, stages] {
            if depth != k.pipeline_depth() && depth <= stages {
                let c = cfg.pipeline_depth(depth);
                let label = if depth == stages {
                    format!("default, whole ring ({stages} stages)")
                } else {
                    format!("default, pipeline depth {depth}")
                };
                v.push((label, time_gemm(cx, &c, opts)?));
            }
        }
    }
    Ok(v)
}

/// What a path-2 kernel runs: its tile and its split-K factor or stream-K plan.
pub fn describe_path2(k: &super::gemm_sm90::Sm90Gemm) -> String {
    let mut what = describe_decomposition(k);
    if k.promotion() != super::gemm_sm90::L2Promotion::B256 {
        what = format!("{what}, L2 promotion {}", k.promotion().name());
    }
    let stages = k.tile().shape().stages;
    if k.pipeline_depth() != stages {
        what = format!("{what}, pipeline depth {} of {stages}", k.pipeline_depth());
    }
    if k.swapped() {
        format!("swapped C^T = B^T A^T, {what}")
    } else {
        what
    }
}

/// [`describe_path2`] without the swap.
fn describe_decomposition(k: &super::gemm_sm90::Sm90Gemm) -> String {
    match k.stream_k() {
        Some(p) => format!(
            "{}, stream-K: {} whole tiles + {} of {} K-steps over {} ranges",
            k.tile().name(),
            p.dp_tiles,
            p.tiles - p.dp_tiles,
            p.k_steps,
            p.sk_units
        ),
        None if k.split_k() > 1 => format!("{}, split-K {}", k.tile().name(), k.split_k()),
        None if k.clustered() => format!("{}, whole tiles, clusters of 2", k.tile().name()),
        None => format!("{}, whole tiles", k.tile().name()),
    }
}

impl GemmRow {
    /// What [`super::gemm::Gemm`] runs by default: the skinny kernels where they are chosen,
    /// else path 2 where the device has it, else path 1 (median ms).
    pub fn ours_ms(&self) -> f64 {
        self.skinny_ms.or(self.path2_ms).unwrap_or(self.path1_ms)
    }
}

/// The table as Markdown: per case, each kernel's ms and TFLOP/s, ours (the default kernel:
/// skinny where chosen, else path 2) / cuBLAS (speed, so above 1 is faster than cuBLAS), path 2
/// and path 1 / cuBLAS, and ours as a fraction of the floor.
pub fn render(rows: &[GemmRow]) -> String {
    let mut s = String::new();
    // The floor is issue 3's, the H200's: on another device the column says so in its header.
    let _ = writeln!(
        s,
        "| shape | M x N x K | skinny ms (TFLOP/s) | path 2 ms (TFLOP/s) | path 1 ms (TFLOP/s) | cuBLAS ms (TFLOP/s) | ours / cuBLAS | path 2 / cuBLAS | path 1 / cuBLAS | ours / H200 floor ({PEAK_TFLOPS:.0} TFLOP/s, {PEAK_TBPS} TB/s) |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in rows {
        let c = &r.case.cfg;
        let tf = |ms: f64| c.flops() / ms / 1e9;
        let cell = |ms: Option<f64>| ms.map_or("–".to_string(), |ms| format!("{ms:.4} ({:.0})", tf(ms)));
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}", b / a),
            _ => "–".into(),
        };
        let floor = format!("{:.2}", floor_ms(c) / r.ours_ms());
        let _ = writeln!(
            s,
            "| {} | {}x{}x{} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.case.label,
            c.m,
            c.n,
            c.k,
            cell(r.skinny_ms),
            cell(r.path2_ms),
            cell(Some(r.path1_ms)),
            cell(r.cublas_ms),
            ratio(Some(r.ours_ms()), r.cublas_ms),
            ratio(r.path2_ms, r.cublas_ms),
            ratio(Some(r.path1_ms), r.cublas_ms),
            floor
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_is_compute_for_big_and_bandwidth_for_skinny() {
        let big = GemmConfig::new(8192, 8192, 8192);
        let compute = big.flops() / 790e12 * 1e3;
        assert!((floor_ms(&big) - compute).abs() < 1e-12);
        // B = 1: the weight read (12288 x 6144 x 2 bytes = 151 MB) dominates: ~35 us.
        let skinny = GemmConfig::new(1, 6144, 12288);
        assert!((floor_ms(&skinny) - 0.0351).abs() < 0.0005, "{}", floor_ms(&skinny));
    }

    #[test]
    fn cases_cover_issue_3() {
        let c = issue3_cases();
        assert_eq!(c.len(), 14);
        assert!(c.iter().any(|x| x.cfg.m == 16384 && x.cfg.n == 8192));
        assert!(c.iter().filter(|x| x.cfg.k == 12288).count() == 6);
    }

    #[test]
    fn render_prints_ratios_as_speedups() {
        let rows = vec![GemmRow {
            case: GemmCase {
                label: "x".into(),
                cfg: GemmConfig::new(1024, 1024, 1024),
            },
            path2_ms: Some(2.0),
            skinny_ms: None,
            path1_ms: 4.0,
            cublas_ms: Some(1.0),
        }];
        let t = render(&rows);
        assert!(t.contains("| 0.50 | 0.50 | 0.25 |"), "{t}");
        // The floor column names whose floor it is (issue 3's H200 rates), on any device.
        assert!(t.contains("ours / H200 floor (790 TFLOP/s, 4.3 TB/s) |"), "{t}");
        let skinny = vec![GemmRow {
            skinny_ms: Some(0.5),
            ..rows[0].clone()
        }];
        let t = render(&skinny);
        assert!(t.contains("| 2.00 | 0.50 | 0.25 |"), "{t}");
    }
}
