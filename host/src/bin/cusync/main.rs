//! The `cusync` command.
//!
//! `cusync` with no subcommand is the main job: with a GPU, the device report, the stream-mode
//! protocol check and the GPT-3 MLP (batch 1024, RowSync) against StreamSync and cuBLAS, with
//! its trace and StreamSync's written to `cusync-trace/`; without one, the wave simulator on
//! the GPT-3 MLP (it says that no GPU was found).

use clap::{Parser, Subcommand};
use cusync::selfcheck::{StreamPair, StreamPairConfig};
use cusync::{Context, Error};
use std::process::ExitCode;

mod layers;
mod mlp;
mod run;
mod tables;
mod trace;

use run::{check_run, run_what, RunWhat};
use tables::{gemm_table, sweep_what, SweepWhat};
use trace::{trace_command, TraceCommand};

#[derive(Parser)]
#[command(
    name = "cusync",
    version,
    about = "Tile-granularity synchronization of dependent GPU kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// CUDA device ordinal.
    #[arg(long, global = true, default_value_t = 0)]
    device: usize,
}

#[derive(Subcommand)]
enum Command {
    /// Device properties and the occupancy of every cusync kernel.
    Info,
    /// Prints the fingerprint (FNV-1a 64, hex) of the PTX a context would load, for the `.fnv`
    /// file beside a cubin named by CUSYNC_CUBIN_FILE (scripts/build-gpu-carry writes both).
    PtxFingerprint,
    /// The stream-mode protocol check (consumer launched first, producer on another stream).
    Check {
        /// Launches (epochs) to run without clearing the semaphores.
        #[arg(long, default_value_t = 3)]
        epochs: u32,
    },
    /// The CPU wave simulator: the paper's V100 tables, the H200 predictions for the GPT-3 MLP,
    /// and the persistent megakernel's GeMM stacks beside micro-batching.
    Simulate {
        /// Print only the GeMM stacks table (persistent model and micro-batching).
        #[arg(long)]
        stacks: bool,
        /// Persistent blocks of the stacks table (resident CTAs; 132 = one per SM).
        #[arg(long, default_value_t = cusync::sim::stacks::STACK_BLOCKS, requires = "stacks")]
        blocks: u32,
        /// Tile times from a tile's end to its post's pushes being visible (stacks table).
        #[arg(long, default_value_t = cusync::sim::stacks::STACK_POST_LATENCY, requires = "stacks", allow_negative_numbers = true)]
        post_latency: f64,
    },
    /// Runs one workload once on the GPU, verified, optionally traced.
    Run {
        /// The workload.
        #[command(subcommand)]
        what: RunWhat,
    },
    /// Sweeps a workload over batch sizes and policies, side by side with StreamSync and cuBLAS.
    Sweep {
        /// The workload.
        #[command(subcommand)]
        what: SweepWhat,
    },
    /// The GeMM table of issue 3: path 2, path 1 and cuBLAS side by side on 8192^3, the GPT-3
    /// MLP GeMMs (B = 1..2048) and 16384x8192x8192 (medians of CUDA-event timings).
    GemmTable {
        /// Timed launches per kernel and shape (after 5 warm-up launches).
        #[arg(long, default_value_t = 20)]
        iters: usize,
        /// Also time path 2 with each of these split-K factors forced (comma separated) on
        /// every case, beside the factor the heuristic picks.
        #[arg(long, value_delimiter = ',')]
        splits: Vec<u32>,
        /// Also time path 2's work decompositions on every case: the default, and each tile
        /// with whole tiles only and with stream-K forced.
        #[arg(long)]
        modes: bool,
    },
    /// Microbenchmarks of the protocol's primitives on the GPU (medians and spreads).
    Bench {
        /// Samples per primitive.
        #[arg(long, default_value_t = 15)]
        samples: usize,
    },
    /// Tile traces: analyse a recorded trace, convert it, or write synthetic ones (no GPU needed).
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Info) => Context::new(cli.device).and_then(|cx| info(&cx)),
        Some(Command::PtxFingerprint) => cusync::kernels::module_ptx().map(|ptx| {
            println!("{:016x}", cusync::kernels::ptx_fingerprint(&ptx));
        }),
        Some(Command::Check { epochs }) => Context::new(cli.device).and_then(|cx| check(&cx, epochs)),
        Some(Command::Simulate { stacks: false, .. }) => {
            print!("{}", cusync::sim::default_report());
            Ok(())
        }
        Some(Command::Simulate {
            stacks: true,
            blocks,
            post_latency,
        }) => simulate_stacks(blocks, post_latency),
        Some(Command::Run { what }) => {
            check_run(&what).and_then(|()| Context::new(cli.device).and_then(|cx| run_what(&cx, what)))
        }
        Some(Command::Sweep { what }) => Context::new(cli.device).and_then(|cx| sweep_what(&cx, what)),
        Some(Command::GemmTable { iters, splits, modes }) => {
            Context::new(cli.device).and_then(|cx| gemm_table(&cx, iters, &splits, modes))
        }
        Some(Command::Bench { samples }) => Context::new(cli.device).and_then(|cx| {
            let table = cusync::microbench::protocol_table(&cx, samples, |row| eprintln!("  measuring {row}"))?;
            print!("{table}");
            Ok(())
        }),
        Some(Command::Trace { command }) => trace_command(command),
        None => main_job(cli.device),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cusync: {e}");
            ExitCode::FAILURE
        }
    }
}

/// With a GPU: device report and protocol check. Without: the simulator, and a plain word why.
fn main_job(device: usize) -> cusync::Result<()> {
    match Context::new(device) {
        Ok(cx) => {
            info(&cx)?;
            println!();
            check(&cx, 3)?;
            println!();
            let trace = std::path::PathBuf::from("cusync-trace");
            run_what(
                &cx,
                RunWhat::Mlp(mlp::MlpArgs {
                    batch: 1024,
                    model: "gpt3".into(),
                    policy: "rowsync".into(),
                    trial: false,
                    trial_cache: None,
                    trace: Some(trace),
                    order: "col".into(),
                    kernel: None,
                    pipeline_depth: None,
                    launch: Vec::new(),
                }),
            )
        }
        Err(e @ (Error::NoDriver | Error::NoDevice(_))) => {
            println!("No GPU found ({e}).");
            println!("Running the wave simulator on the GPT-3 MLP instead (`cusync simulate`).\n");
            print!("{}", cusync::sim::default_report());
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// `cusync simulate --stacks`: the GeMM stacks table with the given blocks and post latency,
/// checked before the model runs.
fn simulate_stacks(blocks: u32, post_latency: f64) -> cusync::Result<()> {
    if blocks == 0 {
        return Err(cusync::Error::InvalidArgument("--blocks must be at least 1".into()));
    }
    if !(post_latency.is_finite() && post_latency >= 0.0) {
        return Err(cusync::Error::InvalidArgument(format!(
            "--post-latency must be a finite number of tile times >= 0, not {post_latency}"
        )));
    }
    print!("{}", cusync::sim::render_stacks_with(blocks, post_latency));
    Ok(())
}

fn info(cx: &Context) -> cusync::Result<()> {
    let d = cx.info();
    println!(
        "device {}: {} (sm_{}{}), {} SMs",
        d.ordinal, d.name, d.major, d.minor, d.sm_count
    );
    println!(
        "  shared memory: {} KiB per SM, {} KiB per block (opt-in); L2 {} MiB; memory {:.1} GiB",
        d.smem_per_sm / 1024,
        d.max_smem_per_block_optin / 1024,
        d.l2_bytes / (1024 * 1024),
        d.total_mem as f64 / (1u64 << 30) as f64
    );
    println!(
        "  PTX: {} ({} kernels)",
        cusync::kernels::PTX_ARCH,
        cusync::kernels::all_entry_points().count()
    );
    println!(
        "  {:<28} {:>6} {:>10} {:>12}",
        "kernel", "regs", "local B", "blocks/SM@256"
    );
    for name in cusync::kernels::all_entry_points() {
        let f = cx.function(name)?;
        let regs = f.num_regs().map_err(Error::driver("reading kernel registers"))?;
        let local = f
            .local_size_bytes()
            .map_err(Error::driver("reading kernel local memory"))?;
        let occ = cx.occupancy(name, 256, 0)?;
        println!("  {name:<28} {regs:>6} {local:>10} {occ:>12}");
    }
    Ok(())
}

fn check(cx: &Context, epochs: u32) -> cusync::Result<()> {
    let cfg = StreamPairConfig::default();
    println!(
        "stream-mode check: {} consumer blocks launched first, {} producer blocks on another stream, {} floats a tile",
        cfg.blocks, cfg.blocks, cfg.tile_elems
    );
    let mut pair = StreamPair::new(cx, cfg)?;
    for epoch in 0..epochs {
        let perm_mul = [1, 37, 95][epoch as usize % 3];
        let r = pair.run_epoch(cx, epoch, perm_mul)?;
        println!("  epoch {epoch}: every element verified, {:.2} ms wall", r.wall_ms);
    }
    println!("stream-mode check passed");
    Ok(())
}

/// `on`/`off` (also true/false, 1/0) for a switch that defaults to the library's choice.
fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("`{s}`: use on or off")),
    }
}

/// A progress bar on stderr for a sweep over `len` values of `what`.
fn sweep_bar(len: usize, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{bar:30}} {{pos}}/{{len}} {what}  {{msg}}  [{{elapsed_precise}}]"
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// Writes `text` to `path`, saying so.
fn write_file(path: &std::path::Path, text: &str) -> cusync::Result<()> {
    std::fs::write(path, text).map_err(|e| Error::InvalidArgument(format!("cannot write {}: {e}", path.display())))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// After a sweep's table: an error naming the Ms that failed (so the exit status says so).
fn fail_on_failed_rows(failed: impl Iterator<Item = usize>) -> cusync::Result<()> {
    let failed: Vec<usize> = failed.collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "the sweep failed at M = {failed:?} (see the table)"
        )))
    }
}

/// A path-2 tile by name (`128x256`, `128x192`, `128x128`, `128x64`).
fn parse_wg_tile(s: &str) -> cusync::Result<cusync::ops::gemm_sm90::WgTile> {
    cusync::ops::gemm_sm90::WgTile::parse(s, "")
}
