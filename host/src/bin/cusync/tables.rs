//! `cusync gemm-table` and `cusync sweep`: the tables measured over shapes and batch sizes.

use clap::Subcommand;
use cusync::{Context, Error};

pub fn gemm_table(cx: &Context, iters: usize, splits: &[u32], modes: bool) -> cusync::Result<()> {
    use cusync::ops::gemm::TimingOptions;
    use cusync::ops::gemm_table::{issue3_cases, measure, render};
    let cases = issue3_cases();
    let bar = indicatif::ProgressBar::new(cases.len() as u64);
    let opts = TimingOptions {
        warmup: 5,
        iters,
        rotate: true,
    };
    let rows = measure(cx, &cases, opts, |label| {
        bar.set_message(label.to_string());
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    println!(
        "GeMM bf16 on {} ({} SMs), medians of {iters} launches; ratios are speedups (cuBLAS time / ours)",
        cx.info().name,
        cx.info().sm_count
    );
    print!("{}", render(&rows));
    println!("(cuBLAS columns of GeMM1 rows time the product without GeLU: cuBLAS has no GeLU epilogue here)");
    let big = &cases[0].cfg;
    for (tile, ms) in cusync::ops::gemm_table::measure_path2_tiles(cx, big, opts)? {
        println!(
            "path 2 forced to {tile}: {}x{}x{} {ms:.4} ms, {:.0} TFLOP/s",
            big.m,
            big.n,
            big.k,
            big.flops() / ms / 1e9
        );
    }
    if !splits.is_empty() {
        println!("path 2 with split-K forced (ms; * = the heuristic's factor):");
        for case in &cases {
            if let Some(t) = cusync::ops::gemm_table::measure_path2_splits(cx, &case.cfg, splits, opts)? {
                let chosen = t.chosen;
                let cells: Vec<String> = t
                    .times
                    .iter()
                    .map(|(s, ms)| format!("{s}{}: {ms:.4}", if *s == chosen { "*" } else { "" }))
                    .collect();
                println!("  {:<26} chosen {chosen:>2}   {}", case.label, cells.join("  "));
            }
        }
    }
    if modes {
        println!("path 2 work decompositions (ms; speedup over cuBLAS in brackets):");
        for (case, row) in cases.iter().zip(&rows) {
            let times = cusync::ops::gemm_table::measure_path2_modes(cx, &case.cfg, opts)?;
            println!("  {}", case.label);
            for (label, ms) in times {
                let vs = row.cublas_ms.map_or(String::new(), |c| format!(" ({:.2})", c / ms));
                println!("    {label:<72} {ms:.4}{vs}");
            }
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum SweepWhat {
    /// An MLP over batch sizes: the paper's wave table with measured times.
    Mlp {
        /// Model whose MLP sizes to sweep: gpt3 (TP=8), gpt3-tp4, llama7b.
        #[arg(long, default_value = "gpt3")]
        model: String,
        /// Batch sizes, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "1,8,64,128,256,512,1024,2048")]
        batches: Vec<usize>,
        /// Timed samples per variant.
        #[arg(long, default_value_t = 20)]
        samples: usize,
        /// Write the table's CSV here, and a speedup chart beside it (same name, .svg).
        #[arg(long)]
        csv: Option<std::path::PathBuf>,
        /// GeMM kernel and tile of both stages (as for `run mlp`). Default: chosen per batch, as
        /// `run mlp` chooses it.
        #[arg(long)]
        kernel: Option<String>,
        /// How each policy's consumer is launched, comma separated, each timed as a variant of
        /// its own: auto (behind the wait kernel where optimization W asks for one, on its own
        /// stream), pdl (programmatic dependent launch on one stream, sm_90; named
        /// policy/order/pdl), always, never. Default: pdl where the device and build run it,
        /// else auto.
        #[arg(long, value_delimiter = ',')]
        launch: Vec<String>,
    },
}

/// The launches named by `--launch` ([`cusync::stream::WaitKernelPolicy::name`]); none given
/// is the device's preferred launch (an empty list, resolved on the device).
pub fn parse_launches(names: &[String]) -> cusync::Result<Vec<cusync::stream::WaitKernelPolicy>> {
    names
        .iter()
        .map(|n| {
            cusync::stream::WaitKernelPolicy::parse(n.trim()).ok_or_else(|| {
                Error::InvalidArgument(format!("unknown launch '{n}': expected auto, pdl, always or never"))
            })
        })
        .collect()
}

pub fn sweep_what(cx: &Context, what: SweepWhat) -> cusync::Result<()> {
    match what {
        SweepWhat::Mlp {
            model,
            batches,
            samples,
            csv,
            kernel,
            launch,
        } => {
            let model = cusync::mlp::MlpModel::parse(&model)?;
            let opts = cusync::mlp::compare::CompareOptions {
                samples,
                tile: kernel.as_deref().map(cusync::mlp::MlpKernel::parse).transpose()?,
                launches: parse_launches(&launch)?,
                ..Default::default()
            };
            let bar = indicatif::ProgressBar::new(batches.len() as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} batches  {msg}  [{elapsed_precise}]")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let mut rows = Vec::new();
            for &b in &batches {
                bar.set_message(format!("batch {b}"));
                rows.push(cusync::mlp::compare::measure(cx, model.shape(b), &opts)?);
                bar.inc(1);
            }
            bar.finish_and_clear();
            print!("{}", cusync::mlp::compare::render(&rows, &cx.info().name));
            if let Some(path) = csv {
                std::fs::write(&path, cusync::mlp::compare::to_csv(&rows))
                    .map_err(|e| Error::InvalidArgument(format!("cannot write {}: {e}", path.display())))?;
                println!("wrote {}", path.display());
                let svg = path.with_extension("svg");
                std::fs::write(&svg, cusync::mlp::plot::speedup_svg(&rows, &cx.info().name))
                    .map_err(|e| Error::InvalidArgument(format!("cannot write {}: {e}", svg.display())))?;
                println!("wrote {} (speedup chart)", svg.display());
            }
            Ok(())
        }
    }
}
