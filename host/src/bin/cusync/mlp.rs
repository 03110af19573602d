//! `cusync run mlp`: the MLP in stream mode under a policy or Policy::Auto's plan, beside
//! StreamSync and cuBLAS, with GeMM1's hooks overhead per order and, on request, traces.

use cusync::mlp::{MlpKernel, MlpPlan, MlpShape};
use cusync::{Context, Error};

/// `cusync run mlp`'s arguments.
#[derive(clap::Args)]
pub struct MlpArgs {
    /// Batch (rows of X).
    #[arg(long, default_value_t = 1024)]
    pub batch: usize,
    /// Model whose MLP sizes to run: gpt3 (TP=8), gpt3-tp4, llama7b.
    #[arg(long, default_value = "gpt3")]
    pub model: String,
    /// Policy: tilesync, rowsync, strided:N, or auto (the wave model's plan: its best
    /// policy where it predicts a gain over StreamSync, else StreamSync).
    #[arg(long, default_value = "rowsync")]
    pub policy: String,
    /// With --policy auto: time StreamSync and the model's candidate policies in each tile
    /// order side by side in a short trial and run the fastest policy that beat StreamSync in
    /// enough rounds (a sign test at 5%), else StreamSync (cached per device, build, shape and
    /// tile).
    #[arg(long)]
    pub trial: bool,
    /// The trial cache file (default: target/cache/cusync-auto-policy.json, or under
    /// $CUSYNC_CACHE_DIR); `none` keeps trials in memory only.
    #[arg(long, value_name = "FILE")]
    pub trial_cache: Option<std::path::PathBuf>,
    /// Write the run's trace and a traced StreamSync run's (JSON, CSV, SVG) into this
    /// directory: mlp-b<batch>-<policy>-<order>.* and mlp-b<batch>-streamsync.*.
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
    /// Tile order of both stages in the traced run: row, col, or band<N> (bands of N row
    /// tiles, column by column). With --policy auto, the plan's order is traced.
    #[arg(long, default_value = "col")]
    pub order: String,
    /// GeMM kernel and tile of both stages: skinny (B <= 16: the weight streamed through
    /// a cp.async ring, one range per resident block), wg128x256, wg128x192, wg128x128, wg64x96,
    /// wg128x64, wg128x16 (path 2, sm_90a; wg128x64 and wg128x16 run both stages swapped,
    /// C^T = B^T A^T, for batches up to 64 and 16; wg64x96 runs batches up to 64 unswapped),
    /// 256x128, 128x128, 64x64 (path 1). Default for B <= 16: wg128x16 on the H100 and H200, skinny
    /// elsewhere; wg64x96 from 17 to 64 where it fills the SMs; else path 2's pair tile where
    /// the device runs it, else path 1.
    #[arg(long)]
    pub kernel: Option<String>,
    /// Stages of the path-2 stages' ring in use, from 2 to the tile's stages (default: all,
    /// but the device's measured depth on wg128x16; StreamSync's launches take the same).
    /// Not with --trace or --trial.
    #[arg(long)]
    pub pipeline_depth: Option<u32>,
    /// How the policy's consumer is launched, comma separated, each timed as a variant of its
    /// own (as for `sweep mlp`) and traced with --trace: auto, pdl, always, never. Default: pdl
    /// where the device and build run it, else auto.
    #[arg(long, value_delimiter = ',')]
    pub launch: Vec<String>,
}

/// What the arguments say, read without a device.
struct Parsed {
    shape: MlpShape,
    kernel: Option<MlpKernel>,
    /// The policy asked for (walking `order` in the traced run), or `None` for Policy::Auto.
    fixed_plan: Option<MlpPlan>,
    launches: Vec<cusync::stream::WaitKernelPolicy>,
}

impl MlpArgs {
    /// The arguments read and checked against each other: an error here comes before any
    /// device is opened.
    fn parse(&self) -> cusync::Result<Parsed> {
        let shape = cusync::mlp::MlpModel::parse(&self.model)?.shape(self.batch);
        if self.pipeline_depth.is_some() && (self.trace.is_some() || self.trial) {
            return Err(Error::InvalidArgument(
                "--pipeline-depth is not taken by the traced run or the policy trial: leave out \
                 --trace and --trial"
                    .into(),
            ));
        }
        let order = cusync::mlp::compare::parse_order(&self.order)?;
        let kernel = self.kernel.as_deref().map(MlpKernel::parse).transpose()?;
        let auto = self.policy.eq_ignore_ascii_case("auto");
        if self.trial && !auto {
            return Err(Error::InvalidArgument("--trial needs --policy auto".into()));
        }
        let fixed_plan = if auto {
            None
        } else {
            Some(MlpPlan::Synced {
                policy: cusync::mlp::parse_policy(&self.policy)?,
                order,
            })
        };
        Ok(Parsed {
            shape,
            kernel,
            fixed_plan,
            launches: super::tables::parse_launches(&self.launch)?,
        })
    }

    /// Checks the arguments without a device.
    pub fn check(&self) -> cusync::Result<()> {
        self.parse().map(|_| ())
    }

    /// Runs it on `cx`.
    pub fn run(self, cx: &Context) -> cusync::Result<()> {
        let Parsed {
            shape,
            kernel,
            fixed_plan,
            launches,
        } = self.parse()?;
        let Self {
            trial,
            trial_cache,
            trace,
            pipeline_depth,
            ..
        } = self;
        let plan = match fixed_plan {
            Some(plan) => plan,
            None => auto_plan(cx, shape, trial, trial_cache, kernel)?,
        };
        let opts = cusync::mlp::compare::CompareOptions {
            samples: 5,
            // StreamSync (auto's plan where no policy gains) is timed in every row.
            policies: plan.policy().into_iter().collect(),
            tile: kernel,
            pipeline_depth,
            launches: launches.clone(),
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
        for v in &row.policies {
            println!(
                "  {:<22} {:>10.1} us (min {:.1}, max {:.1}), wait kernel {}",
                v.name(),
                v.stats.median,
                v.stats.min,
                v.stats.max,
                v.wait_kernel
            );
        }
        use cusync::mlp::MlpOrder;
        // The sweep's orders, then the unsynchronized kernel's own walk (raster groups of 8
        // row tiles).
        let mut orders = cusync::mlp::compare::SEARCH_ORDERS.to_vec();
        orders.push(MlpOrder::Banded(cusync_shared::gemm_sm90::WG_RASTER_GROUP));
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
            print!("{}", cusync::mlp::trace_run(cx, shape, plan, kernel, &launches, &dir)?);
        }
        Ok(())
    }
}

/// `--policy auto [--trial]`: the wave model's plan, or a short measured trial's (cached),
/// printed with where it came from.
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
        "auto: the wave model's best policy is {} (makespan {:.2} vs StreamSync {:.2} producer-block times: a block is a tile, or one split-K unit of one); \
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
        let medians: Vec<String> = t
            .candidates
            .iter()
            .map(|(p, us)| match t.rounds_won_by(p) {
                Some(w) => format!("{p} {us:.1} us ({w}/{})", t.samples),
                None => format!("{p} {us:.1} us"),
            })
            .collect();
        println!(
            "auto: the trial ({how}, medians of {}, side by side; (k/n): rounds faster than StreamSync, \
             {} needed) picks {}: {}",
            t.samples,
            t.rounds_needed,
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
