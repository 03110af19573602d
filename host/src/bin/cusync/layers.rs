//! `cusync run layers`: the persistent megakernel on N-layer stacks beside our single GeMMs,
//! cuBLAS back to back and the best chunk of micro-batching, all timed side by side.

use crate::{parse_wg_tile, write_file};
use cusync::{Context, Error};

/// `cusync run layers`' arguments.
#[derive(clap::Args)]
pub struct LayersArgs {
    /// Rows of the input, e.g. `16384` or `1024,4096,16384,32768` (one report each).
    #[arg(long, value_delimiter = ',', default_value = "16384")]
    pub m: Vec<usize>,
    /// Layer counts to run, e.g. `2,4,8` (one report each).
    #[arg(long, value_delimiter = ',', default_value = "2")]
    pub layers: Vec<usize>,
    /// Width of every layer (W).
    #[arg(long, default_value_t = 8192)]
    pub width: usize,
    /// Megakernel GeMM path: 1 (cp.async + mma.sync, 128x128) or 2 (sm_90a TMA + wgmma).
    /// Default: 2 where the device runs it.
    #[arg(long)]
    pub path: Option<u32>,
    /// Path-2 tile: 128x256 or 128x128. Default: 128x256 when every layer has a tile per SM.
    #[arg(long)]
    pub tile: Option<String>,
    /// Timed launches per variant.
    #[arg(long, default_value_t = 10)]
    pub iters: usize,
    /// Also trace (of the first M and layer count) one pipelined launch, one launch of the same
    /// megakernel with every dependency met up front, one of its no-protocol twin, and the
    /// single GeMMs back to back; write each trace (JSON, CSV, SVG) into this directory and
    /// print each layer's CTA periods and each megakernel launch's block lifetimes.
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
    /// Queue order of every layer's ready tiles: raster (the plain path-2 kernel's grouped
    /// raster, 8 row tiles walked column by column; measured 1.07-1.16x faster pipelined
    /// on the H200, docs/perf-notes.md session 5 run 9) or row (row by row).
    #[arg(long, default_value = "raster")]
    pub order: String,
    /// Policies between layers, each timed pipelined side by side with every priority (the
    /// first pair is also the traced one): band (RowBandSync over the raster's 8-row
    /// groups: a band's tiles are pushed together, in queue order), bandN (N-row bands) and
    /// rowsync (a row's tiles pushed as the row completes, in completion order).
    #[arg(long, value_delimiter = ',', default_value = "band")]
    pub policy: Vec<String>,
    /// Scheduler priorities: up (upstream first: the blocks run one layer at a time and
    /// fill its tail wave with the next layer's ready tiles; the fastest on the H200,
    /// docs/perf-notes.md session 11) and down (downstream first, the paper's order and
    /// the library's default).
    #[arg(long, value_delimiter = ',', default_value = "up,down")]
    pub priority: Vec<String>,
    /// Leave out single-GPU micro-batching (cuBLAS, the chunk size swept, the best chunk
    /// checked against the f64 reference and timed side by side with the rest).
    #[arg(long)]
    pub no_microbatch: bool,
    /// Write every report's variants as CSV here, and a chart of their speedups over our
    /// single GeMMs beside it (same name, .svg).
    #[arg(long)]
    pub csv: Option<std::path::PathBuf>,
}

impl LayersArgs {
    /// Runs every (M, layer count) report on `cx`.
    pub fn run(self, cx: &Context) -> cusync::Result<()> {
        let Self {
            m,
            layers,
            width,
            path,
            tile,
            iters,
            trace,
            order,
            policy,
            priority,
            no_microbatch,
            csv,
        } = self;
        let tile = tile.as_deref().map(parse_wg_tile).transpose()?;
        let order = cusync::persistent::bench::StackOrder::parse(&order)?;
        let priorities: Vec<_> = priority
            .iter()
            .map(|p| cusync::persistent::SchedulePriority::parse(p))
            .collect::<cusync::Result<_>>()?;
        let mut policies = Vec::new();
        for p in &policy {
            let policy = cusync::persistent::bench::StackPolicy::parse(p)?;
            for &priority in &priorities {
                policies.push(cusync::persistent::bench::Pipelining { policy, priority });
            }
        }
        let what = cusync::persistent::bench::SideBySide {
            order,
            policies,
            with_default: false,
            microbatch: !no_microbatch,
            timing: cusync::ops::gemm::TimingOptions {
                warmup: 1,
                iters,
                rotate: false,
            },
        };
        // The first M is the traced one.
        let Some(&traced_m) = m.first() else {
            return Err(Error::InvalidArgument("--m needs at least one row count".into()));
        };
        let mut reports = Vec::new();
        for &rows in &m {
            for &n in &layers {
                let times = run_layers(cx, rows, n, width, (path, tile), &what)?;
                reports.push(cusync::persistent::report::LayersReport {
                    m: rows,
                    layers: n,
                    times,
                });
            }
        }
        if let Some(path) = csv {
            write_file(&path, &cusync::persistent::report::layers_csv(&reports))?;
            let svg = path.with_extension("svg");
            write_file(&svg, &cusync::persistent::report::layers_svg(&reports, &cx.info().name))?;
        }
        if let Some(dir) = trace {
            let policies = &what.policies;
            let widths = vec![width; layers.first().copied().unwrap_or(2) + 1];
            let kind = cusync::persistent::pick_stack_worker(
                cusync::ops::gemm_sm90::device_supports(cx),
                cx.info().sm_count,
                traced_m,
                &widths,
                path,
                tile,
            )?;
            let report = cusync::persistent::trace_layers(cx, traced_m, &widths, kind, order, policies[0], &dir)?;
            print!("{report}");
        }
        Ok(())
    }
}

/// `cusync run layers`: one `layers`-layer stack `[m, width] x [width, width] x ...`.
fn run_layers(
    cx: &Context,
    m: usize,
    layers: usize,
    width: usize,
    (path, tile): (Option<u32>, Option<cusync::ops::gemm_sm90::WgTile>),
    what: &cusync::persistent::bench::SideBySide,
) -> cusync::Result<cusync::persistent::bench::LayerTimes> {
    use cusync::ops::gemm::{Gemm, GemmConfig};
    if layers == 0 {
        return Err(Error::InvalidArgument("a layer stack needs at least one layer".into()));
    }
    let iters = what.timing.iters;
    let widths = vec![width; layers + 1];
    let supports = cusync::ops::gemm_sm90::device_supports(cx);
    let kind = cusync::persistent::pick_stack_worker(supports, cx.info().sm_count, m, &widths, path, tile)?;
    // Single launches: the megakernel's per-tile configuration, and our default (best) config.
    let same_cfg = cusync::persistent::bench::layer_config(m, width, width, kind);
    let default_cfg = GemmConfig::new(m, width, width);
    let describe = |cfg: &GemmConfig| -> cusync::Result<String> {
        let g = Gemm::new(cx, *cfg)?;
        Ok(match g.path2() {
            Some(k) => format!("path 2 {}", cusync::ops::gemm_table::describe_path2(k)),
            None => format!("path 1 {}", g.tile().name()),
        })
    };
    let (same_what, default_what) = (describe(&same_cfg)?, describe(&default_cfg)?);
    let what = cusync::persistent::bench::SideBySide {
        with_default: default_what != same_what,
        ..what.clone()
    };
    let times = cusync::persistent::bench::time_layers_side_by_side(cx, m, &widths, kind, &what)?;
    let t = times.persistent;
    let l = layers as f64;
    println!(
        "{layers}-layer [{m},{width}]x[{width},{width}]{} bf16 on {} (medians of {iters} side-by-side rounds, ms):",
        if layers > 1 {
            format!(" x{layers}")
        } else {
            String::new()
        },
        cx.info().name
    );
    for (i, (policy, ms)) in times.pipelined_by_policy.iter().enumerate() {
        let what = format!("pipelined ({})", policy.name());
        if i == 0 {
            println!(
                "  megakernel `{}`, {what:<24} {ms:>9.3}   {} CTAs, {} tiles",
                t.kernel, t.ctas, t.tiles
            );
        } else {
            println!(
                "  same, {what:<38} {ms:>9.3}   ({:.3} x the first)",
                ms / t.pipelined_ms
            );
        }
    }
    println!(
        "  same, every dependency met up front          {:>9.3}",
        t.no_dependencies_ms
    );
    println!(
        "  same, no protocol code (twin)                {:>9.3}",
        t.no_protocol_ms
    );
    let same = times.singles_ms;
    println!(
        "  our GeMM ({same_what}), {layers} single launches ({layers} x {:.3})  {:>9.3}",
        same / l,
        same
    );
    if let Some(d) = times.default_singles_ms {
        println!(
            "  our GeMM, default config ({default_what}), {layers} single launches ({layers} x {:.3})  {:>9.3}",
            d / l,
            d
        );
    }
    match times.cublas_ms {
        Some(c) => println!("  cuBLAS back to back ({layers} x {:.3})  {:>9.3}", c / l, c),
        None => println!("  cuBLAS: unavailable"),
    }
    if let Some(mb) = &times.microbatch {
        let checked = mb
            .sweep
            .per_chunk
            .iter()
            .find(|c| c.chunk == mb.sweep.best_chunk)
            .and_then(|c| c.error)
            .map_or(String::new(), |e| format!(", sampled rows within {e:.1e} of f64"));
        println!(
            "  micro-batching, cuBLAS, best chunk {} rows of {} ({} streams{checked})  {:>9.3}",
            mb.sweep.best_chunk, m, mb.sweep.streams, mb.best_ms
        );
    }
    let best_single = times.default_singles_ms.map_or(same, |d| d.min(same));
    for (policy, ms) in &times.pipelined_by_policy {
        println!(
            "  pipelined ({}) / {layers} single GeMMs = {:.3} (best single config {:.3})",
            policy.name(),
            ms / same,
            ms / best_single
        );
    }
    if let Some(mb) = &times.microbatch {
        for (policy, ms) in &times.pipelined_by_policy {
            println!(
                "  pipelined ({}) vs best-chunk micro-batching: {:+.1}% latency ({:.3} / {:.3} ms)",
                policy.name(),
                (ms / mb.best_ms - 1.0) * 100.0,
                ms,
                mb.best_ms
            );
        }
        let sweep: Vec<String> = mb
            .sweep
            .per_chunk
            .iter()
            .map(|c| format!("{}: {:.3}", c.chunk, c.stats.median))
            .collect();
        println!("  micro-batching sweep (chunk rows: ms) {}", sweep.join(", "));
        for n in &mb.sweep.notes {
            println!("  micro-batching note: {n}");
        }
    }
    println!(
        "  protocol overhead (no-deps / no-protocol) = {:+.2}%",
        (t.no_dependencies_ms / t.no_protocol_ms - 1.0) * 100.0
    );
    print_variant_clocks(&times.clocks);
    print_paired_rounds(&times);
    Ok(times)
}

/// `run layers`' paired lines: issue 5's ratios taken round by round (each round runs every
/// variant once, so a ratio's two sides ran a few hundred milliseconds apart), their median
/// and range. A ratio of medians mixes rounds whose clocks differ under the power cap; the
/// paired one compares neighbours.
fn print_paired_rounds(times: &cusync::persistent::bench::LayerTimes) {
    use cusync::persistent::bench::variant_names as names;
    let mut pairs = vec![(
        names::DEPS_MET.to_string(),
        names::TWIN,
        "protocol overhead (no-deps / no-protocol)",
    )];
    for (policy, _) in &times.pipelined_by_policy {
        let pipelined = names::pipelined(*policy);
        for (other, what) in [
            (names::SINGLES, "/ single GeMMs"),
            (names::CUBLAS, "/ cuBLAS back to back"),
            (names::MICROBATCH, "/ best-chunk micro-batching"),
        ] {
            pairs.push((pipelined.clone(), other, what));
        }
    }
    let rounds = times.rounds.first().map_or(0, |(_, s)| s.len());
    println!(
        "  paired by round (median of the {rounds} rounds' own ratios, min-max; rounds below 1, two-sided sign test):"
    );
    for (a, b, what) in pairs {
        if let Some(st) = times.paired(&a, b) {
            let label = if b == names::TWIN {
                what.to_string()
            } else {
                format!("{a} {what}")
            };
            let (below, above) = times.paired_signs(&a, b).unwrap_or((0, 0));
            let p = cusync::microbench::sign_test_two_sided(below, below + above);
            println!(
                "    {label}: {:.4} ({:+.2}%), {:.4}-{:.4}; below 1 in {below} of {} rounds (sign test p = {p:.3})",
                st.median,
                (st.median - 1.0) * 100.0,
                st.min,
                st.max,
                below + above
            );
        }
    }
}

/// `run layers`' clock lines: each variant's SM clock during its timed launches (a power-capped
/// variant runs slower for its clock, not only for its code), or why none were read.
fn print_variant_clocks(clocks: &Result<Vec<(String, cusync::runtime::clocks::ClockStats)>, String>) {
    match clocks {
        Ok(per_variant) if !per_variant.is_empty() => {
            println!("  SM clock during each variant's timed launches (NVML, MHz: mean, min-max; share under the power cap):");
            let cells: Vec<String> = per_variant
                .iter()
                .map(|(name, st)| {
                    format!(
                        "{name} {:.0}, {}-{}, {:.0}%",
                        st.sm_mhz_mean,
                        st.sm_mhz_min,
                        st.sm_mhz_max,
                        100.0 * st.power_capped
                    )
                })
                .collect();
            println!("    {}", cells.join("; "));
        }
        Ok(_) => println!("  clocks: no sample landed in a timed launch"),
        Err(why) => println!("  clocks: not read ({why})"),
    }
}
