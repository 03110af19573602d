//! `cusync run gemm`: one GeMM problem, checked and timed beside cuBLAS, with the kernel
//! choices a user (or an A/B experiment with `CUSYNC_PTX_FILE`) wants to pin: the kernel
//! family and tile, clusters, stream-K, split-K.

use super::gemm::{reference_gemm_at, time_gemm, Epilogue, Gemm, GemmConfig, TimingOptions};
use super::gemm_sm90::WgTile;
use super::gemm_table::describe_path2;
use crate::baselines::cublas::time_cublas_gemm;
use crate::microbench::Stats;
use crate::mlp::MlpKernel;
use crate::{Context, Error, Result};
use half::bf16;
use rand::{Rng, SeedableRng};
use std::fmt::Write;

/// What `run gemm` pins (every `None` leaves the library's choice).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GemmRunOptions {
    /// Kernel family and tile (`wg128x256`, `wg128x192`, `wg128x128`, `wg64x96`, `wg128x64`,
    /// `wg128x16`, `256x128`, `128x128`, `64x64`).
    pub kernel: Option<String>,
    /// Clusters of two with B multicast forced on or off.
    pub cluster: Option<bool>,
    /// Stream-K forced on or off.
    pub stream_k: Option<bool>,
    /// Stream-K ranges forced (stream-K on over this many blocks).
    pub stream_k_ranges: Option<u32>,
    /// Split-K factor forced.
    pub split_k: Option<u32>,
    /// Swapped operands (`C^T = B^T A^T`) forced on or off.
    pub swap_ab: Option<bool>,
    /// The skinny kernels (`M <= 64`) forced on or off.
    pub skinny: Option<bool>,
    /// The skinny kernels' column block width (64 or 128).
    pub skinny_cols: Option<u32>,
    /// GeLU epilogue (the MLP's first GeMM).
    pub gelu: bool,
    /// Path 2's tensor maps' L2 promotion forced (`none`, `64`, `128`, `256`).
    pub l2_promotion: Option<String>,
    /// Path 2's pipeline depth forced (stages of the tile's ring in use, from 2).
    pub pipeline_depth: Option<u32>,
}

impl GemmRunOptions {
    /// The bf16, row-major `m x n x k` problem with these choices, checked before any GPU work
    /// (unknown kernel names, and choices that only path 2 has on a path-1 kernel, are errors).
    pub fn config(&self, m: usize, n: usize, k: usize) -> Result<GemmConfig> {
        let mut cfg = GemmConfig::new(m, n, k);
        if self.gelu {
            cfg = cfg.epilogue(Epilogue::Gelu);
        }
        let lower = self.kernel.as_deref().map(str::to_ascii_lowercase);
        let kernel = match lower.as_deref() {
            // Every path-2 tile (the skinny 128 x 64 one too, which has no stream-mode stage).
            Some(s) if s.starts_with("wg") => Some(MlpKernel::Path2(WgTile::parse(s, "wg")?)),
            other => other.map(MlpKernel::parse).transpose()?,
        };
        let path1 = match kernel {
            Some(MlpKernel::Path1(t)) => {
                cfg = cfg.tile(t);
                true
            }
            Some(MlpKernel::Path2(t)) => {
                cfg = cfg.wg_tile(t);
                false
            }
            Some(MlpKernel::Skinny) => {
                if self.skinny == Some(false) {
                    return Err(Error::InvalidArgument(
                        "--kernel skinny and --skinny off contradict each other".into(),
                    ));
                }
                cfg = cfg.skinny(true);
                false
            }
            None => false,
        };
        if path1
            && (self.cluster.is_some()
                || self.stream_k.is_some()
                || self.stream_k_ranges.is_some()
                || self.split_k.is_some()
                || self.swap_ab.is_some()
                || self.l2_promotion.is_some()
                || self.pipeline_depth.is_some())
        {
            return Err(Error::InvalidArgument(
                "--cluster, --stream-k, --stream-k-ranges, --split-k, --swap-ab, --l2-promotion and --pipeline-depth \
                 choose how GeMM path 2 divides its work and loads its operands; the kernel asked for is path 1"
                    .into(),
            ));
        }
        if let Some(d) = self.pipeline_depth {
            if cfg.skinny == Some(true) || self.skinny == Some(true) {
                return Err(Error::InvalidArgument(
                    "--pipeline-depth sets GeMM path 2's ring of stages; the skinny kernels have none".into(),
                ));
            }
            if d < 2 {
                return Err(Error::InvalidArgument(
                    "--pipeline-depth must be at least 2 (one stage would serialize loads and wgmma)".into(),
                ));
            }
            cfg = cfg.pipeline_depth(d);
        }
        if let Some(p) = &self.l2_promotion {
            if cfg.skinny == Some(true) || self.skinny == Some(true) {
                return Err(Error::InvalidArgument(
                    "--l2-promotion sets GeMM path 2's tensor maps; the skinny kernels load through cp.async".into(),
                ));
            }
            cfg = cfg.l2_promotion(super::gemm_sm90::L2Promotion::parse(p)?);
        }
        if let Some(on) = self.swap_ab {
            cfg = cfg.swap_ab(on);
        }
        if let Some(on) = self.skinny {
            cfg = cfg.skinny(on);
        }
        if let Some(cols) = self.skinny_cols {
            cfg = cfg.skinny_cols(cols);
        }
        if let Some(on) = self.cluster {
            cfg = cfg.cluster(on);
        }
        if let Some(on) = self.stream_k {
            cfg = cfg.stream_k(on);
        }
        if let Some(r) = self.stream_k_ranges {
            // The library's own refusals (zero ranges, a forced split-K, stream-K forced off).
            let mut forced = cfg;
            forced.stream_k_ranges = Some(r);
            forced.split_k = self.split_k;
            super::gemm_sm90::stream_k_blocks(&forced, u32::MAX)?;
            cfg = cfg.stream_k_ranges(r);
        }
        if let Some(s) = self.split_k {
            if s == 0 {
                return Err(Error::InvalidArgument("--split-k must be at least 1".into()));
            }
            cfg = cfg.split_k(s);
        }
        Ok(cfg)
    }
}

/// `MxNxK bf16`, with ` + GeLU` for the MLP's first GeMM: the problem as the reports name it.
fn problem_label(cfg: &GemmConfig) -> String {
    let gelu = if cfg.epilogue == Epilogue::Gelu { " + GeLU" } else { "" };
    format!("{}x{}x{} bf16{gelu}", cfg.m, cfg.n, cfg.k)
}

/// The depths [`depth_sweep_report`] times for a ring of `stages`: 2 up to `stages`, the whole
/// ring last.
pub fn sweep_depths(stages: u32) -> Vec<u32> {
    (2..=stages).collect()
}

/// `cfg`'s path-2 launch timed at every pipeline depth ([`sweep_depths`] of its tile's ring),
/// with cuBLAS once per round, `rounds` rounds interleaved (depths in a different order each
/// round), `iters` launches each: one line per depth with its median ms over the rounds and
/// ours / cuBLAS. Times only: each depth's results are checked by the GPU test
/// `gemm::path2_every_pipeline_depth` and by `run gemm --pipeline-depth N`. An error where
/// `cfg` does not run on path 2 (the skinny kernels have no ring: `--skinny off`).
pub fn depth_sweep_report(cx: &Context, cfg: &GemmConfig, iters: usize, rounds: usize) -> Result<String> {
    let gemm = Gemm::new(cx, *cfg)?;
    let k = match (gemm.skinny(), gemm.path2()) {
        (None, Some(k)) => k,
        _ => {
            return Err(Error::InvalidArgument(
                "--depth-sweep times GeMM path 2's ring of stages; this problem runs the skinny kernels or path 1 \
                 (--skinny off, or a path-2 tile)"
                    .into(),
            ))
        }
    };
    let stages = k.tile().shape().stages;
    let what = describe_path2(k);
    let depths = sweep_depths(stages);
    let opts = TimingOptions {
        warmup: 5,
        iters,
        rotate: true,
    };
    let rounds = rounds.max(1);
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); depths.len()];
    let mut cublas = Vec::new();
    for r in 0..rounds {
        for i in 0..depths.len() {
            // Rotate the order each round so no depth always runs first (clocks, L2 state).
            let j = (i + r) % depths.len();
            times[j].push(time_gemm(cx, &cfg.pipeline_depth(depths[j]), opts)?);
        }
        if let Ok(c) = time_cublas_gemm(cx, &cfg.epilogue(Epilogue::None), opts) {
            cublas.push(c);
        }
    }
    let cublas = (!cublas.is_empty()).then(|| Stats::of(&mut cublas).median);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "pipeline depths of GeMM {} on {} ({what}; {stages} stages), medians of {rounds} rounds of {iters} launches:",
        problem_label(cfg),
        cx.info().name
    );
    for (d, t) in depths.iter().zip(times.iter_mut()) {
        let ms = Stats::of(t).median;
        let ratio = cublas.map_or("-".to_string(), |c| format!("{:.3}", c / ms));
        let _ = writeln!(
            s,
            "  depth {d:>2}{}  {ms:.4} ms  ours / cuBLAS {ratio}",
            if *d == stages { " (all)" } else { "      " }
        );
    }
    if let Some(c) = cublas {
        let _ = writeln!(s, "  cuBLAS    {c:.4} ms (no epilogue)");
    }
    Ok(s)
}

/// One traced launch of `gemm` (operands `a`, `b` into `c`) timed between two CUDA events:
/// where its time goes, from the per-tile events (`t_start` when a tile's first stage landed,
/// `t_end` after its stores): the launch's event time against the span from the first tile's
/// start to the last tile's end (what lies outside is launch, the first loads' latency and
/// exit), how far apart the tiles start and end, and the median and longest tile.
fn trace_timeline(
    cx: &Context,
    gemm: &Gemm,
    stream: &crate::Stream,
    a: &crate::DeviceBuffer<bf16>,
    b: &crate::DeviceBuffer<bf16>,
    c: &mut crate::DeviceBuffer<bf16>,
) -> Result<(String, Vec<crate::trace::TraceEvent>)> {
    let p = gemm.check(a, b, c, None)?;
    let mut trace = crate::stream::trace_buffer(cx, gemm.trace_tiles(&p))?;
    // Warm: the traced launch's own time, not a first launch's.
    gemm.launch(stream, a, b, c, None)?;
    let (start, end) = (cx.new_event()?, cx.new_event()?);
    stream.record(&start)?;
    gemm.launch_traced(stream, a, b, c, None, &mut trace)?;
    stream.record(&end)?;
    stream.synchronize()?;
    let event_us = f64::from(start.elapsed_ms(&end)?) * 1e3;
    let events = gemm.trace_events(&p, &trace, 0)?;
    let first_start = events.iter().map(|e| e.t_start).min().unwrap_or(0);
    let last_start = events.iter().map(|e| e.t_start).max().unwrap_or(0);
    let first_end = events.iter().map(|e| e.t_end).min().unwrap_or(0);
    let last_end = events.iter().map(|e| e.t_end).max().unwrap_or(0);
    let us = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e3;
    // Sorts `v` and returns its middle element (the upper one of an even count).
    let median_of = |v: &mut Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let mut durations: Vec<f64> = events.iter().map(|e| us(e.t_start, e.t_end)).collect();
    let median = median_of(&mut durations);
    let longest = durations.last().copied().unwrap_or(0.0);
    // Path 2 stamps a block's first tile's dispatch at block entry: its setup is
    // `t_ready - t_dispatch` and its first loads `t_start - t_ready`.
    let first_tiles: Vec<&crate::trace::TraceEvent> = events.iter().filter(|e| e.t_dispatch < e.t_ready).collect();
    let setup = if first_tiles.is_empty() {
        String::new()
    } else {
        let entry = first_tiles.iter().map(|e| e.t_dispatch).min().unwrap_or(0);
        format!(
            "; blocks: first entry to last end {:.1} us, setup median {:.2} us, first loads median {:.2} us",
            us(entry, last_end),
            median_of(&mut first_tiles.iter().map(|e| us(e.t_dispatch, e.t_ready)).collect()),
            median_of(&mut first_tiles.iter().map(|e| us(e.t_ready, e.t_start)).collect()),
        )
    };
    // The SMs whose tiles ran >= 1.10x the median (`cusync trace analyze` names them).
    let slow = crate::trace::SlowSms::of_events(&events)
        .summary()
        .map_or(String::new(), |s| format!("; {s}"));
    let line = format!(
        "traced launch: {event_us:.1} us between events, tiles span {:.1} us (first start to last end); \
         starts spread {:.1} us, ends {:.1} us; {} tiles, median {median:.1} us, longest {longest:.1} us{setup}{slow}",
        us(first_start, last_end),
        us(first_start, last_start),
        us(first_end, last_end),
        events.len()
    );
    Ok((line, events))
}

/// Sampled output points: the four corners, then random ones (`count` in all at most).
fn sample_points(cfg: &GemmConfig, count: usize, rng: &mut impl Rng) -> Vec<(usize, usize)> {
    let (m, n) = (cfg.m, cfg.n);
    let mut v = vec![(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)];
    while v.len() < count {
        v.push((rng.random_range(0..m), rng.random_range(0..n)));
    }
    v.truncate(count.max(4));
    v
}

/// Largest error of `got` against the f64 `reference`, relative to the reference's largest
/// magnitude (NaN when any sample is not finite: an unwritten, poisoned element).
fn sampled_error(got: &[f64], reference: &[f64]) -> f64 {
    if got.iter().any(|v| !v.is_finite()) {
        return f64::NAN;
    }
    let scale = reference.iter().fold(0f64, |a, v| a.max(v.abs())).max(1e-30);
    got.iter().zip(reference).fold(0f64, |a, (g, r)| a.max((g - r).abs())) / scale
}

/// Runs `cfg` once on fresh random operands (C poisoned with NaN) and checks 256 sampled
/// outputs against the f64 reference (error relative to the largest reference magnitude, at
/// most 2e-2 for a bf16 output), then times it (median of `iters` after 5 warm-up launches,
/// operands rotated past L2) beside cuBLAS on the same problem without the epilogue. Returns
/// the report.
pub fn run_gemm(cx: &Context, cfg: &GemmConfig, iters: usize, seed: u64) -> Result<String> {
    run_gemm_traced(cx, cfg, iters, seed, None)
}

/// [`run_gemm`], also writing the traced launch's per-tile events (one stage,
/// `gemm<M>x<N>x<K>`; a swapped launch's tiles are those of `C^T`) as Chrome JSON, CSV and an
/// SVG timeline into `trace_dir` when given (`cusync trace analyze` reads them back).
pub fn run_gemm_traced(
    cx: &Context,
    cfg: &GemmConfig,
    iters: usize,
    seed: u64,
    trace_dir: Option<&std::path::Path>,
) -> Result<String> {
    let gemm = Gemm::new(cx, *cfg)?;
    let what = match (gemm.skinny(), gemm.path2()) {
        (Some(s), _) => {
            let p = s.plan();
            format!(
                "skinny `{}` ({} column blocks x {} chunks over {} blocks; the traced launch runs {})",
                s.kernel_name(),
                p.col_blocks,
                p.chunks_per_block,
                p.ctas,
                gemm.path2()
                    .map_or("path 1".to_string(), |k| format!("path 2 `{}`", k.kernel_name()))
            )
        }
        (None, Some(k)) => format!("path 2 `{}` ({})", k.kernel_name(), describe_path2(k)),
        (None, None) => format!("path 1 `{}`", gemm.kernel_name()),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut random =
        |len: usize| -> Vec<bf16> { (0..len).map(|_| bf16::from_f32(rng.random_range(-1.0..1.0))).collect() };
    let (a, b) = (random(cfg.a_len()), random(cfg.b_len()));
    let (da, db) = (cx.upload(&a)?, cx.upload(&b)?);
    let mut dc = cx.upload(&vec![bf16::from_f32(f32::NAN); cfg.c_len()])?;
    let stream = cx.new_stream()?;
    gemm.launch(&stream, &da, &db, &mut dc, None)?;
    stream.synchronize()?;
    if let Some(k) = gemm.path2() {
        k.errors().check()?;
    }
    let c = dc.download()?;
    let points = sample_points(cfg, 256, &mut rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed));
    let to_f64 = |v: &[bf16]| v.iter().map(|x| f64::from(x.to_f32())).collect::<Vec<f64>>();
    let reference = reference_gemm_at(cfg, &to_f64(&a), &to_f64(&b), None, &points);
    let got: Vec<f64> = points
        .iter()
        .map(|&(r, col)| f64::from(c[r * cfg.n + col].to_f32()))
        .collect();
    let error = sampled_error(&got, &reference);
    if error.is_nan() || error > 2e-2 {
        return Err(Error::InvalidArgument(format!(
            "{}x{}x{} on {what}: sampled outputs differ from the f64 reference by {error:.3e} (NaN: an output was never written)",
            cfg.m, cfg.n, cfg.k
        )));
    }
    let opts = TimingOptions {
        warmup: 5,
        iters,
        rotate: true,
    };
    let ours = time_gemm(cx, cfg, opts)?;
    let (timeline, events) = trace_timeline(cx, &gemm, &stream, &da, &db, &mut dc)?;
    let written = match trace_dir {
        Some(dir) => {
            let stem = format!("gemm{}x{}x{}", cfg.m, cfg.n, cfg.k);
            let meta = crate::trace::TraceMeta {
                label: format!("GeMM {}x{}x{} on {what}", cfg.m, cfg.n, cfg.k),
                device: cx.info().name.clone(),
                sm_count: Some(cx.info().sm_count),
                stages: Vec::new(),
            };
            crate::trace::Trace::new(meta, events)?.save_all(dir, &stem)?
        }
        None => Vec::new(),
    };
    let cublas = time_cublas_gemm(cx, &cfg.epilogue(Epilogue::None), opts).ok();
    let tflops = |ms: f64| cfg.flops() / ms / 1e9;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "GeMM {} on {} ({} SMs), medians of {iters} launches:",
        problem_label(cfg),
        cx.info().name,
        cx.info().sm_count
    );
    let _ = writeln!(s, "  ours    {ours:.4} ms  {:>6.1} TFLOP/s  {what}", tflops(ours));
    let _ = writeln!(
        s,
        "  verified: 256 sampled outputs within {error:.2e} of the f64 reference"
    );
    let _ = writeln!(s, "  {timeline}");
    for path in &written {
        let _ = writeln!(s, "  wrote {}", path.display());
    }
    match cublas {
        Some(c) => {
            let _ = writeln!(s, "  cuBLAS  {c:.4} ms  {:>6.1} TFLOP/s  (no epilogue)", tflops(c));
            let _ = writeln!(s, "  ours / cuBLAS (speed): {:.3}", c / ours);
        }
        None => {
            let _ = writeln!(s, "  cuBLAS: not available here");
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_pin_the_choices_and_refuse_path_2_choices_on_path_1() {
        let o = GemmRunOptions {
            kernel: Some("wg128x256".into()),
            cluster: Some(true),
            gelu: true,
            ..Default::default()
        };
        let cfg = o.config(8192, 8192, 8192).unwrap();
        assert_eq!(cfg.cluster, Some(true));
        assert_eq!(cfg.epilogue, Epilogue::Gelu);
        let o = GemmRunOptions {
            kernel: Some("128x128".into()),
            stream_k: Some(true),
            ..Default::default()
        };
        let e = o.config(64, 64, 64).unwrap_err().to_string();
        assert!(e.contains("path 1"), "{e}");
        let o = GemmRunOptions {
            stream_k_ranges: Some(128),
            ..Default::default()
        };
        let cfg = o.config(64, 12288, 6144).unwrap();
        assert_eq!((cfg.stream_k, cfg.stream_k_ranges), (Some(true), Some(128)));
        for bad in [
            GemmRunOptions {
                stream_k_ranges: Some(128),
                split_k: Some(2),
                ..Default::default()
            },
            GemmRunOptions {
                stream_k_ranges: Some(128),
                stream_k: Some(false),
                ..Default::default()
            },
            GemmRunOptions {
                stream_k_ranges: Some(0),
                ..Default::default()
            },
        ] {
            assert!(bad.config(64, 12288, 6144).is_err(), "{bad:?}");
        }
        let o = GemmRunOptions {
            kernel: Some("wg64x64".into()),
            ..Default::default()
        };
        assert!(o.config(64, 64, 64).is_err());
        let o = GemmRunOptions {
            split_k: Some(0),
            ..Default::default()
        };
        assert!(o.config(64, 64, 64).unwrap_err().to_string().contains("split-k"));
        // The L2 promotion: a path-2 choice (it keeps the skinny default off), refused on path
        // 1 and with the skinny kernels, and parsed.
        let o = GemmRunOptions {
            l2_promotion: Some("none".into()),
            ..Default::default()
        };
        let cfg = o.config(8, 12288, 6144).unwrap();
        assert_eq!(cfg.l2_promotion, Some(crate::ops::gemm_sm90::L2Promotion::None));
        assert!(!cfg.no_kernel_forced());
        for (kernel, skinny) in [(Some("128x128"), None), (None, Some(true))] {
            let o = GemmRunOptions {
                kernel: kernel.map(Into::into),
                skinny,
                l2_promotion: Some("128".into()),
                ..Default::default()
            };
            assert!(o.config(8, 12288, 6144).is_err(), "{o:?}");
        }
        let o = GemmRunOptions {
            l2_promotion: Some("96".into()),
            ..Default::default()
        };
        assert!(o
            .config(8, 12288, 6144)
            .unwrap_err()
            .to_string()
            .contains("L2 promotion"));
        // The pipeline depth: a path-2 choice, at least 2, refused on path 1 and with the
        // skinny kernels (the tile's own bound is checked where the tile is known).
        let o = GemmRunOptions {
            pipeline_depth: Some(4),
            ..Default::default()
        };
        let cfg = o.config(64, 12288, 6144).unwrap();
        assert_eq!(cfg.pipeline_depth, Some(4));
        assert!(!cfg.no_kernel_forced());
        for (kernel, skinny, depth) in [
            (Some("128x128"), None, 4),
            (None, Some(true), 4),
            (None, None, 1),
            (None, None, 0),
        ] {
            let o = GemmRunOptions {
                kernel: kernel.map(Into::into),
                skinny,
                pipeline_depth: Some(depth),
                ..Default::default()
            };
            assert!(o.config(8, 12288, 6144).is_err(), "{o:?}");
        }
    }

    #[test]
    fn depth_sweep_covers_the_ring() {
        assert_eq!(sweep_depths(9), (2..=9).collect::<Vec<_>>());
        assert_eq!(sweep_depths(2), vec![2]);
        for depth in sweep_depths(11) {
            assert!(cusync_shared::gemm_sm90::pipeline_depth_ok(depth, 11));
        }
    }

    #[test]
    fn samples_include_the_corners_and_errors_catch_unwritten_outputs() {
        let cfg = GemmConfig::new(3, 5, 7);
        let p = sample_points(&cfg, 10, &mut rand::rngs::StdRng::seed_from_u64(1));
        assert_eq!(p.len(), 10);
        assert_eq!(&p[..4], &[(0, 0), (0, 4), (2, 0), (2, 4)]);
        assert!(p.iter().all(|&(r, c)| r < 3 && c < 5));
        assert!(sampled_error(&[1.0, f64::NAN], &[1.0, 2.0]).is_nan());
        assert!((sampled_error(&[1.0, 2.1], &[1.0, 2.0]) - 0.05).abs() < 1e-12);
    }
}
