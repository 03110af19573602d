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
    /// The CPU wave simulator: the paper's V100 tables and the H200 predictions for the GPT-3 MLP.
    Simulate,
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

#[derive(Subcommand)]
enum RunWhat {
    /// One bf16 GeMM [M,K]x[K,N] checked on sampled outputs against an f64 reference and timed
    /// beside cuBLAS; the kernel family, tile and work division can be pinned.
    Gemm {
        /// Rows of A and C.
        #[arg(long, default_value_t = 8192)]
        m: usize,
        /// Columns of B and C.
        #[arg(long, default_value_t = 8192)]
        n: usize,
        /// The reduction dimension.
        #[arg(long, default_value_t = 8192)]
        k: usize,
        /// Kernel and tile: wg128x256, wg128x192, wg128x128, wg64x96, wg128x64, wg128x16 (path 2, sm_90a), 256x128, 128x128, 64x64
        /// (path 1). Default: the library's choice.
        #[arg(long)]
        kernel: Option<String>,
        /// Path 2's clusters of two blocks multicasting B: on or off (default: the library's).
        #[arg(long, value_parser = parse_on_off)]
        cluster: Option<bool>,
        /// Path 2's stream-K: on or off (default: the library's).
        #[arg(long, value_parser = parse_on_off)]
        stream_k: Option<bool>,
        /// Path 2's stream-K over this many ranges, one block each (at most the resident
        /// blocks; default: one per resident block). Turns stream-K on.
        #[arg(long)]
        stream_k_ranges: Option<u32>,
        /// Path 2's split-K factor (default: the library's).
        #[arg(long)]
        split_k: Option<u32>,
        /// Path 2's swapped operands, C^T = B^T A^T on the 128x64 tile: on or off (default: the
        /// library's, on for M <= 64 when no path-2 tile is forced).
        #[arg(long, value_parser = parse_on_off)]
        swap_ab: Option<bool>,
        /// The skinny kernels (M <= 64, the weight streamed through a cp.async ring): on or off
        /// (default: the library's, on for M <= 16 when nothing else is forced, but on the
        /// devices whose small batches run path 2's 128x16 tile instead: the H100 and H200).
        #[arg(long, value_parser = parse_on_off)]
        skinny: Option<bool>,
        /// The skinny kernels' column block width: 64 or 128 (M <= 16; default: the library's).
        #[arg(long)]
        skinny_cols: Option<u32>,
        /// GeLU epilogue (the MLP's first GeMM).
        #[arg(long)]
        gelu: bool,
        /// Path 2's L2 promotion of both operands' tensor maps: none, 64, 128 or 256 (default:
        /// the library's 256, 128 on the 64x96 tile; forcing it picks path 2 where the skinny
        /// kernels would run).
        #[arg(long)]
        l2_promotion: Option<String>,
        /// Path 2's pipeline depth: the stages of the tile's ring a launch uses, from 2 to the
        /// tile's stages (default: the device's measured depth for weight-streaming batches, 5
        /// on the H100 and 6 on the H200 where measured, else all; fewer keep fewer of the
        /// weight's bytes in flight).
        #[arg(long)]
        pipeline_depth: Option<u32>,
        /// Timed launches.
        #[arg(long, default_value_t = 20)]
        iters: usize,
        /// Write the traced launch's per-tile events (JSON, CSV, SVG) into this directory:
        /// gemm<M>x<N>x<K>.*.
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
        /// Also time the read probe: B read once, with no arithmetic, under the skinny
        /// kernel's access pattern and wider ones (the weight-streaming ceiling).
        #[arg(long)]
        read_probe: bool,
        /// Also time path 2 at every pipeline depth from 2 to its tile's stages, three rounds
        /// with cuBLAS beside (times only; not with --pipeline-depth).
        #[arg(long)]
        depth_sweep: bool,
    },
    /// The TMA streaming probe (issue 3): blocks stream a row-major bf16 weight [K,N] through
    /// TMA boxes into shared-memory stages as the path-2 GeMM's producer does, with no
    /// arithmetic, under a chosen cut; every block's checksum is checked against the CPU's and
    /// its time recorded (median, longest, slow blocks, span). sm_90a only. Defaults: the
    /// GPT-3 MLP's B = 64 GeMM2 weight as our swapped 128 x 64 tile streams it.
    TmaProbe {
        /// Rows of the weight.
        #[arg(long, default_value_t = 6144)]
        k: usize,
        /// Columns of the weight (a multiple of --strip-cols).
        #[arg(long, default_value_t = 12288)]
        n: usize,
        /// Rows of the batch operand [batch, K] (0: no batch box).
        #[arg(long, default_value_t = 64)]
        batch: usize,
        /// Rows of the batch box each stage loads: 64 or 128 (rows past --batch zero-filled),
        /// or 0 for none.
        #[arg(long, default_value_t = 64)]
        batch_box_rows: u32,
        /// Weight columns per strip (a stage's weight is strip x 64 K-rows).
        #[arg(long, default_value_t = 128)]
        strip_cols: u32,
        /// Box width in columns: 16, 32 or 64 (a remainder of 16 or 32 is one narrower box).
        #[arg(long, default_value_t = 64)]
        box_cols: u32,
        /// Pipeline stages.
        #[arg(long, default_value_t = 9)]
        stages: u32,
        /// L2 promotion of the weight's tensor maps: none, 64, 128 or 256.
        #[arg(long, default_value = "256")]
        l2_promotion: String,
        /// How strips are divided among blocks: strips, split:S or ranges:R (stream-K ranges).
        #[arg(long, default_value = "strips")]
        division: String,
        /// Run the sweep of configurations around the one given (the probe's preset list).
        #[arg(long)]
        sweep: bool,
        /// Timed launches per configuration (after 5 warm-up launches).
        #[arg(long, default_value_t = 20)]
        iters: usize,
    },
    /// An MLP in stream mode (GeMM+GeLU -> GeMM), checked against StreamSync.
    Mlp {
        /// Batch (rows of X).
        #[arg(long, default_value_t = 1024)]
        batch: usize,
        /// Model whose MLP sizes to run: gpt3 (TP=8), gpt3-tp4, llama7b.
        #[arg(long, default_value = "gpt3")]
        model: String,
        /// Policy: tilesync, rowsync, strided:N, or auto (the wave model's plan: its best
        /// policy where it predicts a gain over StreamSync, else StreamSync).
        #[arg(long, default_value = "rowsync")]
        policy: String,
        /// With --policy auto: time StreamSync and the model's candidate policies in each tile
        /// order side by side in a short trial and run the fastest (cached per device, build,
        /// shape and tile).
        #[arg(long)]
        trial: bool,
        /// The trial cache file (default: target/cache/cusync-auto-policy.json, or under
        /// $CUSYNC_CACHE_DIR); `none` keeps trials in memory only.
        #[arg(long, value_name = "FILE")]
        trial_cache: Option<std::path::PathBuf>,
        /// Write the run's trace and a traced StreamSync run's (JSON, CSV, SVG) into this
        /// directory: mlp-b<batch>-<policy>-<order>.* and mlp-b<batch>-streamsync.*.
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
        /// Tile order of both stages in the traced run: row, col, or band<N> (bands of N row
        /// tiles, column by column). With --policy auto, the plan's order is traced.
        #[arg(long, default_value = "col")]
        order: String,
        /// GeMM kernel and tile of both stages: skinny (B <= 16: the weight streamed through
        /// a cp.async ring, one range per resident block), wg128x256, wg128x192, wg128x128, wg64x96,
        /// wg128x64 (path 2, sm_90a; wg128x64 runs both stages swapped, C^T = B^T A^T, for small
        /// batches; wg64x96 runs batches up to 64 unswapped), 256x128, 128x128, 64x64 (path 1). Default: skinny for B <= 16, else path 2
        /// where the device runs it.
        #[arg(long)]
        kernel: Option<String>,
        /// Stages of the path-2 stages' ring in use, from 2 to the tile's stages (default: all,
        /// but the device's measured depth on wg128x16; StreamSync's launches take the same).
        /// Not with --trace or --trial.
        #[arg(long)]
        pipeline_depth: Option<u32>,
    },
    /// An N-layer [M,W]x[W,W]x... bf16 stack (default 2 layers of 8192): the persistent
    /// megakernel (pipelined under each policy and priority, all dependencies met up front, no
    /// protocol code) beside N single GeMMs of our kernel, cuBLAS back to back and the best
    /// chunk of cuBLAS micro-batching, all timed side by side. The megakernel is the path-2 one
    /// (TMA + wgmma, a post warp) where the device runs it, else path 1.
    Layers {
        /// Rows of the input, e.g. `16384` or `1024,4096,16384,32768` (one report each).
        #[arg(long, value_delimiter = ',', default_value = "16384")]
        m: Vec<usize>,
        /// Layer counts to run, e.g. `2,4,8` (one report each).
        #[arg(long, value_delimiter = ',', default_value = "2")]
        layers: Vec<usize>,
        /// Width of every layer (W).
        #[arg(long, default_value_t = 8192)]
        width: usize,
        /// Megakernel GeMM path: 1 (cp.async + mma.sync, 128x128) or 2 (sm_90a TMA + wgmma).
        /// Default: 2 where the device runs it.
        #[arg(long)]
        path: Option<u32>,
        /// Path-2 tile: 128x256 or 128x128. Default: 128x256 when every layer has a tile per SM.
        #[arg(long)]
        tile: Option<String>,
        /// Timed launches per variant.
        #[arg(long, default_value_t = 10)]
        iters: usize,
        /// Also run one traced pipelined launch (of the first layer count) and write its trace
        /// (JSON, CSV, SVG) into this directory.
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
        /// Queue order of every layer's ready tiles: raster (the plain path-2 kernel's grouped
        /// raster, 8 row tiles walked column by column; measured 1.07-1.16x faster pipelined
        /// on the H200, docs/perf-notes.md session 5 run 9) or row (row by row).
        #[arg(long, default_value = "raster")]
        order: String,
        /// Policies between layers, each timed pipelined side by side with every priority (the
        /// first pair is also the traced one): band (RowBandSync over the raster's 8-row
        /// groups: a band's tiles are pushed together, in queue order), bandN (N-row bands) and
        /// rowsync (a row's tiles pushed as the row completes, in completion order).
        #[arg(long, value_delimiter = ',', default_value = "band")]
        policy: Vec<String>,
        /// Scheduler priorities: up (upstream first: the blocks run one layer at a time and
        /// fill its tail wave with the next layer's ready tiles; the fastest on the H200,
        /// docs/perf-notes.md session 11) and down (downstream first, the paper's order and
        /// the library's default).
        #[arg(long, value_delimiter = ',', default_value = "up,down")]
        priority: Vec<String>,
        /// Leave out single-GPU micro-batching (cuBLAS, the chunk size swept, the best chunk
        /// checked against the f64 reference and timed side by side with the rest).
        #[arg(long)]
        no_microbatch: bool,
        /// Write every report's variants as CSV here, and a chart of their speedups over our
        /// single GeMMs beside it (same name, .svg).
        #[arg(long)]
        csv: Option<std::path::PathBuf>,
    },
    /// Multi-GPU CTA-pipelining: an N-layer [M,W]x[W,W]... bf16 chain, layer i on GPU i, in
    /// stream mode (system-scope edges) beside micro-batching (cuBLAS, chunk size swept) and
    /// tensor parallelism (cuBLAS + NCCL over all the GPUs, an all-reduce every two layers),
    /// per M (a list sweeps M with a progress bar and ends with a summary table beside the
    /// paper's Fig. 5 / Table I numbers). With fewer GPUs than layers it runs on virtual
    /// devices of one GPU and says that the multi-GPU numbers need more GPUs.
    Multigpu {
        /// Rows of the input; a comma-separated list sweeps M (e.g. 1024,2048,...,32768).
        #[arg(long, value_delimiter = ',', default_value = "16384")]
        m: Vec<usize>,
        /// Width of every weight (W x W).
        #[arg(long, default_value_t = 8192)]
        width: usize,
        /// Layers (one per GPU).
        #[arg(long, default_value_t = 2)]
        layers: usize,
        /// GPU ordinals, one per layer, comma separated (repeats: virtual devices). Default:
        /// GPUs 0.. when enough are present, else virtual devices on --device.
        #[arg(long, value_delimiter = ',')]
        devices: Vec<usize>,
        /// Micro-batching chunk sizes in rows, comma separated (default: 256, 512, ... M);
        /// chunks larger than an M are skipped at that M.
        #[arg(long, value_delimiter = ',')]
        chunks: Vec<usize>,
        /// Micro-batching streams per GPU.
        #[arg(long, default_value_t = 4)]
        streams: usize,
        /// Timed runs per variant.
        #[arg(long, default_value_t = 5)]
        iters: usize,
        /// CTA-pipelining policy between layers: tilesync or rowsync.
        #[arg(long, default_value = "rowsync")]
        policy: String,
        /// Our GeMM kernel for every layer: 256x128, 128x128, 64x64 (path 1) or wg128x256,
        /// wg128x128 (path 2, sm_90a). Default: path 2 where every GPU runs it, else path 1.
        #[arg(long)]
        kernel: Option<String>,
        /// Write the summary table as CSV here.
        #[arg(long)]
        csv: Option<std::path::PathBuf>,
    },
    /// Tensor parallelism combined with CTA-pipelining (paper Fig. 6-7): Y = X A B (W x W
    /// weights) on G groups of 2 GPUs (group g: GPU 2g computes H_g = X A_g, GPU 2g+1
    /// Y_g = H_g B_g, CTA-pipelined; an NCCL all-reduce over the G consumer GPUs) against pure
    /// TP over all 2G GPUs; compute, all-reduce and total per M. With fewer than 2G GPUs it runs
    /// on virtual devices and marks what NCCL cannot run there.
    MultigpuTp {
        /// Rows of X, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "4096,8192,16384")]
        m: Vec<usize>,
        /// Groups of two GPUs (G; 2G GPUs in all).
        #[arg(long, default_value_t = 2)]
        groups: usize,
        /// W: A and B are W x W.
        #[arg(long, default_value_t = 8192)]
        width: usize,
        /// GPU ordinals, 2G of them (group g on the 2g-th and (2g+1)-th), comma separated
        /// (repeats: virtual devices). Default: GPUs 0..2G when present, else virtual devices
        /// on --device.
        #[arg(long, value_delimiter = ',')]
        devices: Vec<usize>,
        /// Timed runs per variant.
        #[arg(long, default_value_t = 5)]
        iters: usize,
        /// CTA-pipelining policy inside each group: tilesync or rowsync.
        #[arg(long, default_value = "rowsync")]
        policy: String,
        /// Our GeMM kernel (as for `run multigpu`). Default: path 2 where every GPU runs it.
        #[arg(long)]
        kernel: Option<String>,
        /// Write the table as CSV here.
        #[arg(long)]
        csv: Option<std::path::PathBuf>,
    },
}

#[derive(Subcommand)]
enum SweepWhat {
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
        /// GeMM kernel and tile of both stages (as for `run mlp`). Default: skinny for B <= 16,
        /// else path 2 where the device runs it, with its tile chosen per batch.
        #[arg(long)]
        kernel: Option<String>,
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
        Some(Command::Simulate) => {
            print!("{}", cusync::sim::default_report());
            Ok(())
        }
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
                RunWhat::Mlp {
                    batch: 1024,
                    model: "gpt3".into(),
                    policy: "rowsync".into(),
                    trial: false,
                    trial_cache: None,
                    trace: Some(trace),
                    order: "col".into(),
                    kernel: None,
                    pipeline_depth: None,
                },
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

/// `cusync trace ...` (the work is in `cusync::trace::cli`).
#[derive(Subcommand)]
enum TraceCommand {
    /// Per-wave report of a trace (.json Chrome trace or .csv): waves, SM busy fraction, waits,
    /// tails, critical path; writes the SVG timeline beside the trace unless told otherwise.
    Analyze {
        /// The trace (.json or .csv).
        file: std::path::PathBuf,
        /// Write the SVG timeline here instead of beside the trace.
        #[arg(long, value_name = "OUT", conflicts_with = "no_svg")]
        svg: Option<std::path::PathBuf>,
        /// Write no SVG timeline.
        #[arg(long)]
        no_svg: bool,
        /// Buckets of the busy timeline in the report.
        #[arg(long, default_value_t = 20)]
        buckets: usize,
    },
    /// Rewrites a trace in the format of OUT's extension (.json, .csv or .svg).
    Convert {
        /// The trace (.json or .csv).
        input: std::path::PathBuf,
        /// Where to write it.
        output: std::path::PathBuf,
    },
    /// Writes JSON, CSV and SVG of two synthetic runs (stream vs row synchronization) into DIR.
    Demo {
        /// The directory (created if missing).
        dir: std::path::PathBuf,
    },
}

fn trace_command(command: TraceCommand) -> cusync::Result<()> {
    use cusync::trace::cli::{self, SvgTarget};
    let text = match command {
        TraceCommand::Analyze {
            file,
            svg,
            no_svg,
            buckets,
        } => {
            let target = match (svg, no_svg) {
                (_, true) => SvgTarget::Skip,
                (Some(out), false) => SvgTarget::At(out),
                (None, false) => SvgTarget::Beside,
            };
            cli::analyze_file(&file, &target, buckets)?
        }
        TraceCommand::Convert { input, output } => cli::convert(&input, &output)?,
        TraceCommand::Demo { dir } => cli::demo(&dir)?,
    };
    print!("{text}");
    Ok(())
}

/// Checks what `run` can check without a GPU, so bad input is reported before a device is
/// opened (today: `run gemm`'s choices).
/// The TMA probe's configuration from `run tma-probe`'s arguments (parsed and its stage
/// checked, so bad arguments are refused before a context opens).
fn tma_probe_config(what: &RunWhat) -> cusync::Result<cusync::ops::tma_probe::TmaProbeConfig> {
    let RunWhat::TmaProbe {
        k,
        n,
        batch,
        batch_box_rows,
        strip_cols,
        box_cols,
        stages,
        l2_promotion,
        division,
        ..
    } = what
    else {
        return Err(Error::InvalidArgument("not a tma-probe run".into()));
    };
    let cfg = cusync::ops::tma_probe::TmaProbeConfig {
        k: *k,
        n: *n,
        batch: *batch,
        batch_box_rows: *batch_box_rows,
        strip_cols: *strip_cols,
        box_cols: *box_cols,
        stages: *stages,
        promotion: cusync::ops::gemm_sm90::L2Promotion::parse(l2_promotion)?,
        division: cusync::ops::tma_probe::ProbeDivision::parse(division)?,
    };
    cfg.stage()?;
    Ok(cfg)
}

fn check_run(what: &RunWhat) -> cusync::Result<()> {
    if matches!(what, RunWhat::TmaProbe { .. }) {
        tma_probe_config(what)?;
    }
    if let RunWhat::Gemm {
        m,
        n,
        k,
        kernel,
        cluster,
        stream_k,
        stream_k_ranges,
        split_k,
        swap_ab,
        skinny,
        skinny_cols,
        gelu,
        l2_promotion,
        pipeline_depth,
        depth_sweep,
        ..
    } = what
    {
        if *depth_sweep && pipeline_depth.is_some() {
            return Err(cusync::Error::InvalidArgument(
                "--depth-sweep times every pipeline depth; drop --pipeline-depth".into(),
            ));
        }
        let opts = cusync::ops::gemm_run::GemmRunOptions {
            kernel: kernel.clone(),
            cluster: *cluster,
            stream_k: *stream_k,
            stream_k_ranges: *stream_k_ranges,
            split_k: *split_k,
            swap_ab: *swap_ab,
            skinny: *skinny,
            skinny_cols: *skinny_cols,
            gelu: *gelu,
            l2_promotion: l2_promotion.clone(),
            pipeline_depth: *pipeline_depth,
        };
        let cfg = opts.config(*m, *n, *k)?;
        cfg.validate(cfg.resolve_tile(1))?;
    }
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

fn run_what(cx: &Context, what: RunWhat) -> cusync::Result<()> {
    match what {
        RunWhat::Gemm {
            m,
            n,
            k,
            kernel,
            cluster,
            stream_k,
            stream_k_ranges,
            split_k,
            swap_ab,
            skinny,
            skinny_cols,
            gelu,
            l2_promotion,
            pipeline_depth,
            iters,
            trace,
            read_probe,
            depth_sweep,
        } => {
            let opts = cusync::ops::gemm_run::GemmRunOptions {
                kernel,
                cluster,
                stream_k,
                stream_k_ranges,
                split_k,
                swap_ab,
                skinny,
                skinny_cols,
                gelu,
                l2_promotion,
                pipeline_depth,
            };
            let cfg = opts.config(m, n, k)?;
            print!(
                "{}",
                cusync::ops::gemm_run::run_gemm_traced(cx, &cfg, iters, 0x6e6d, trace.as_deref())?
            );
            if read_probe {
                print!("{}", cusync::ops::read_probe::read_probe_report(cx, &cfg, iters)?);
            }
            if depth_sweep {
                print!("{}", cusync::ops::gemm_run::depth_sweep_report(cx, &cfg, iters, 3)?);
            }
            Ok(())
        }
        RunWhat::Multigpu {
            m,
            width,
            layers,
            devices,
            chunks,
            streams,
            iters,
            policy,
            kernel,
            csv,
        } => {
            use cusync::multigpu::compare;
            let opts = compare::CompareOptions {
                m: m.first().copied().unwrap_or(0),
                width,
                layers,
                iters,
                chunks,
                streams,
                policy: cusync::mlp::parse_policy(&policy)?,
                kernel: kernel.as_deref().map(cusync::mlp::MlpKernel::parse).transpose()?,
            };
            compare::validate_sweep(&opts, &m)?;
            let (set, heading) = compare::open_devices(cx.info().ordinal, &devices, layers)?;
            print!("{heading}");
            let bar = sweep_bar(m.len(), "M");
            let rows = compare::sweep(&set, &opts, &m, |row| {
                bar.suspend(|| match &row.report {
                    Ok(r) => println!("{r}"),
                    Err(e) => println!("M = {}: FAILED: {e}\n", row.m),
                });
                bar.set_message(format!("M = {} done", row.m));
                bar.inc(1);
            })?;
            bar.finish_and_clear();
            print!("{}", compare::render_sweep(&rows, &opts));
            if let Some(path) = csv {
                write_file(&path, &compare::sweep_csv(&rows, &opts))?;
            }
            fail_on_failed_rows(rows.iter().filter(|r| r.report.is_err()).map(|r| r.m))
        }
        RunWhat::MultigpuTp {
            m,
            groups,
            width,
            devices,
            iters,
            policy,
            kernel,
            csv,
        } => {
            use cusync::multigpu::tp_cta;
            let opts = tp_cta::TpCtaOptions {
                width,
                groups,
                iters,
                policy: cusync::mlp::parse_policy(&policy)?,
                kernel: kernel.as_deref().map(cusync::mlp::MlpKernel::parse).transpose()?,
            };
            for &mm in &m {
                tp_cta::validate_tp_cta(mm, &opts)?;
            }
            let (set, heading) = tp_cta::open_devices(cx.info().ordinal, &devices, groups)?;
            print!("{heading}");
            let bar = sweep_bar(m.len(), "M");
            let rows = tp_cta::sweep(&set, &m, &opts, |row| {
                bar.set_message(format!("M = {} done", row.m));
                bar.inc(1);
            })?;
            bar.finish_and_clear();
            print!("{}", tp_cta::render(&rows, &opts, &set.describe(), set.is_virtual()));
            if let Some(path) = csv {
                write_file(&path, &tp_cta::to_csv(&rows, &opts, set.is_virtual()))?;
            }
            fail_on_failed_rows(rows.iter().filter(|r| r.row.is_err()).map(|r| r.m))
        }
        RunWhat::TmaProbe { sweep, iters, .. } => {
            let cfg = tma_probe_config(&what)?;
            let configs = if sweep {
                cusync::ops::tma_probe::TmaProbeConfig::sweep(cfg)
            } else {
                vec![cfg]
            };
            for c in &configs {
                c.stage()?;
                c.plan(cx.info().sm_count)?;
            }
            let bar = sweep_bar(configs.len(), "tma probe");
            let table = cusync::ops::tma_probe::tma_probe_table(cx, &configs, iters, |row| {
                bar.println(row);
                bar.inc(1);
            });
            bar.finish_and_clear();
            print!("{}", table?);
            Ok(())
        }
        RunWhat::Layers {
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
        } => {
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
        RunWhat::Mlp {
            batch,
            model,
            policy,
            trial,
            trial_cache,
            trace,
            order,
            kernel,
            pipeline_depth,
        } => {
            let shape = cusync::mlp::MlpModel::parse(&model)?.shape(batch);
            if pipeline_depth.is_some() && (trace.is_some() || trial) {
                return Err(Error::InvalidArgument(
                    "--pipeline-depth is not taken by the traced run or the policy trial: leave out \
                     --trace and --trial"
                        .into(),
                ));
            }
            let order = cusync::mlp::compare::parse_order(&order)?;
            let kernel = kernel.as_deref().map(cusync::mlp::MlpKernel::parse).transpose()?;
            let auto = policy.eq_ignore_ascii_case("auto");
            if trial && !auto {
                return Err(Error::InvalidArgument("--trial needs --policy auto".into()));
            }
            use cusync::mlp::MlpPlan;
            let plan = if auto {
                auto_plan(cx, shape, trial, trial_cache, kernel)?
            } else {
                MlpPlan::Synced {
                    policy: cusync::mlp::parse_policy(&policy)?,
                    order,
                }
            };
            let opts = cusync::mlp::compare::CompareOptions {
                samples: 5,
                // StreamSync (auto's plan where no policy gains) is timed in every row.
                policies: plan.policy().into_iter().collect(),
                tile: kernel,
                pipeline_depth,
                ..Default::default()
            };
            let row = cusync::mlp::compare::measure(cx, shape, &opts)?;
            print!(
                "{}",
                cusync::mlp::compare::render(std::slice::from_ref(&row), &cx.info().name)
            );
            println!(
                "verified: bitwise equal to StreamSync; sampled rows within {:.2e} of the f64 reference",
                row.reference_error
            );
            for (name, s, wait) in &row.policies {
                println!(
                    "  {name:<22} {:>10.1} us (min {:.1}, max {:.1}), wait kernel {wait}",
                    s.median, s.min, s.max
                );
            }
            use cusync::mlp::MlpOrder;
            let orders = [
                MlpOrder::RowMajor,
                MlpOrder::ColumnMajor,
                MlpOrder::Banded(2),
                MlpOrder::Banded(4),
                // The unsynchronized kernel's own walk (raster groups of 8 row tiles).
                MlpOrder::Banded(cusync_shared::gemm_sm90::WG_RASTER_GROUP),
            ];
            let mut mlp = cusync::mlp::Mlp::with_pipeline_depth(cx, shape, kernel, 11, pipeline_depth)?;
            let (plain, hooked) = mlp.hooks_overhead(&orders, 10)?;
            println!("GeMM1 alone: unsynchronized kernel {plain:.1} us; stream-mode kernel (hooks, no edge):");
            for (o, t) in orders.iter().zip(&hooked) {
                println!(
                    "  order {:<6} {t:>10.1} us  ({:.3}x the unsynchronized kernel)",
                    cusync::mlp::compare::order_name(*o),
                    t / plain
                );
            }
            if let Some(dir) = trace {
                if plan == MlpPlan::StreamSync {
                    println!("auto keeps StreamSync: only StreamSync's trace is written");
                }
                print!("{}", cusync::mlp::trace_run(cx, shape, plan, kernel, &dir)?);
            }
            Ok(())
        }
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

/// `--policy auto [--trial]`: the wave model's plan, or the fastest of a short measured trial
/// (cached), printed with where it came from.
fn auto_plan(
    cx: &Context,
    shape: cusync::mlp::MlpShape,
    trial: bool,
    trial_cache: Option<std::path::PathBuf>,
    kernel: Option<cusync::mlp::MlpKernel>,
) -> cusync::Result<cusync::mlp::MlpPlan> {
    use cusync::mlp::auto::{choose, default_cache_file, AutoOptions, Decision};
    let cache_file = match trial_cache {
        Some(p) if p.as_os_str() == "none" => None,
        Some(p) => Some(p),
        None => Some(default_cache_file()),
    };
    let opts = AutoOptions {
        trial,
        cache_file: cache_file.clone(),
        ..AutoOptions::default()
    };
    let choice = choose(cx, shape, kernel, &opts)?;
    let prediction = &choice.prediction;
    println!(
        "auto: the wave model's best policy is {} (makespan {:.2} vs StreamSync {:.2} producer-tile times); \
         a policy is taken where it gains {}% or more",
        prediction.best().map_or("none", |b| b.policy.name()),
        prediction.best().map_or(f64::NAN, |b| b.stats.makespan),
        prediction.stream_sync.makespan,
        cusync::sim::report::RECOMMEND_MARGIN * 100.0
    );
    if let Some(w) = &choice.warning {
        println!("auto: {w}");
    }
    if let Some(t) = &choice.trial {
        let how = match choice.decision {
            Decision::Trial => "measured now".to_string(),
            Decision::CachedInProcess => "cached in this process".to_string(),
            Decision::CachedInFile => format!(
                "cached in {}",
                cache_file
                    .as_deref()
                    .map_or("memory".into(), |p| p.display().to_string())
            ),
            Decision::Model => "the model".to_string(),
        };
        let medians: Vec<String> = t.candidates.iter().map(|(p, us)| format!("{p} {us:.1} us")).collect();
        println!(
            "auto: the trial ({how}, medians of {}, side by side) picks {}: {}",
            t.samples,
            choice.plan.name(),
            medians.join(", ")
        );
        if choice.decision == Decision::Trial {
            if let Some(p) = &cache_file {
                println!("auto: trial cached in {}", p.display());
            }
        }
    }
    println!("auto: runs {}", choice.plan.name());
    Ok(choice.plan)
}

fn gemm_table(cx: &Context, iters: usize, splits: &[u32], modes: bool) -> cusync::Result<()> {
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

/// A path-2 tile by name (`128x256`, `128x192`, `128x128`, `128x64`).
fn parse_wg_tile(s: &str) -> cusync::Result<cusync::ops::gemm_sm90::WgTile> {
    cusync::ops::gemm_sm90::WgTile::parse(s, "")
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
    Ok(times)
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

fn sweep_what(cx: &Context, what: SweepWhat) -> cusync::Result<()> {
    match what {
        SweepWhat::Mlp {
            model,
            batches,
            samples,
            csv,
            kernel,
        } => {
            let model = cusync::mlp::MlpModel::parse(&model)?;
            let opts = cusync::mlp::compare::CompareOptions {
                samples,
                tile: kernel.as_deref().map(cusync::mlp::MlpKernel::parse).transpose()?,
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
