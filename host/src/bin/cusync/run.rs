//! `cusync run`: one workload once on the GPU, verified, optionally traced.

use crate::{fail_on_failed_rows, parse_on_off, sweep_bar, write_file};
use clap::Subcommand;
use cusync::{Context, Error};

#[derive(Subcommand)]
pub enum RunWhat {
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
        /// (path 1). Default: the library's choice. wg128x16 with no division forced takes the
        /// library's split-K for it, not stream-K.
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
    Mlp(crate::mlp::MlpArgs),
    /// An N-layer [M,W]x[W,W]x... bf16 stack (default 2 layers of 8192): the persistent
    /// megakernel (pipelined under each policy and priority, all dependencies met up front, no
    /// protocol code) beside N single GeMMs of our kernel, cuBLAS back to back and the best
    /// chunk of cuBLAS micro-batching, all timed side by side. The megakernel is the path-2 one
    /// (TMA + wgmma, a post warp) where the device runs it, else path 1.
    Layers(crate::layers::LayersArgs),
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

pub fn check_run(what: &RunWhat) -> cusync::Result<()> {
    if let RunWhat::Mlp(args) = what {
        args.check()?;
    }
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

pub fn run_what(cx: &Context, what: RunWhat) -> cusync::Result<()> {
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
        RunWhat::Layers(args) => args.run(cx),
        RunWhat::Mlp(args) => args.run(cx),
    }
}
