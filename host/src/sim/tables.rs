//! Wave tables and schedule predictions for kernel pairs: one row per configuration, with the
//! paper's wave arithmetic and the event-driven schedule of StreamSync and of each policy.

use crate::shared::policy::{validate, Dependency, PolicyKind, SyncPolicy};
use crate::shared::Grid;

use super::presets::{ConvCase, MlpCase};
use super::schedule::{simulate_fine_grained, simulate_stream_sync, ScheduleError, ScheduleStats, StageSpec};
use super::waves::{KernelWaves, PairWaves};
use super::workload::{mlp_gemms, Conv2dShape, GemmShape, Gpu, Tiling};

/// How long a thread block takes in the schedule simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileTimes {
    /// Every block takes 1: makespans come out in waves, as the paper counts them.
    Unit,
    /// A block takes time in proportion to its multiply-accumulates times its kernel's
    /// occupancy (blocks sharing an SM share its throughput), the producer's block being 1.
    ByWork,
}

/// Knobs of the schedule predictions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimOptions {
    /// Block run times.
    pub tile_times: TileTimes,
    /// Cost of one wait in producer-block times (a semaphore round trip to L2).
    pub wait_cost: f64,
}

/// About 1 us of semaphore round trip against the ~190 us per wave of the paper's V100 GeMMs.
pub const V100_WAIT_COST: f64 = 0.005;

/// About 1 us of semaphore round trip against ~70 us for a 128x128x12288 bf16 tile on one
/// H200 SM (790 TFLOP/s over 132 SMs).
pub const H200_WAIT_COST: f64 = 0.015;

/// The outcome of one policy's fine-grained schedule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicyOutcome {
    /// The policy.
    pub policy: PolicyKind,
    /// Its simulated schedule.
    pub stats: ScheduleStats,
}

/// StreamSync against every valid candidate policy, for one kernel pair.
#[derive(Clone, Debug, PartialEq)]
pub struct PairPrediction {
    /// The stream-synchronized schedule.
    pub stream_sync: ScheduleStats,
    /// Each candidate policy that validates for the pair, in candidate order.
    pub policies: Vec<PolicyOutcome>,
}

impl PairPrediction {
    /// The policy with the shortest makespan; on a tie (within 1e-9), the one that waits less.
    /// `None` when no candidate validated.
    pub fn best(&self) -> Option<&PolicyOutcome> {
        self.policies.iter().min_by(|a, b| {
            let (ma, mb) = (a.stats.makespan, b.stats.makespan);
            if (ma - mb).abs() <= 1e-9 {
                a.stats.waits.cmp(&b.stats.waits)
            } else {
                ma.total_cmp(&mb)
            }
        })
    }

    /// StreamSync makespan over the best policy's (1.0 when no policy validated).
    pub fn speedup(&self) -> f64 {
        self.best()
            .map_or(1.0, |b| self.stream_sync.makespan / b.stats.makespan)
    }

    /// The best policy if it beats StreamSync by more than `margin` (a fraction: 0.01 is 1%),
    /// else `None`: stay with stream synchronization.
    pub fn recommended(&self, margin: f64) -> Option<&PolicyOutcome> {
        self.best().filter(|_| self.speedup() > 1.0 + margin)
    }
}

/// One kernel of a pair, as the predictor needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelSpec {
    /// The GeMM (or implicit GeMM) it computes.
    pub shape: GemmShape,
    /// Its tiling.
    pub tiling: Tiling,
    /// Thread blocks per SM.
    pub occupancy: u32,
}

impl KernelSpec {
    /// The launch grid.
    pub const fn grid(&self) -> Grid {
        self.shape.grid(self.tiling)
    }

    fn block_cost(&self) -> f64 {
        self.shape.macs_per_thread_block(self.tiling) as f64 * f64::from(self.occupancy)
    }
}

/// Waves of a kernel pair on `gpu`.
pub fn pair_waves(gpu: Gpu, producer: KernelSpec, consumer: KernelSpec) -> PairWaves {
    PairWaves {
        producer: KernelWaves::new(producer.grid(), producer.occupancy, gpu),
        consumer: KernelWaves::new(consumer.grid(), consumer.occupancy, gpu),
    }
}

/// Simulates StreamSync and every candidate policy that validates for the pair.
pub fn predict_pair(
    gpu: Gpu,
    producer: KernelSpec,
    consumer: KernelSpec,
    dependency: Dependency,
    candidates: &[PolicyKind],
    options: SimOptions,
) -> Result<PairPrediction, ScheduleError> {
    let (p_time, c_time) = match options.tile_times {
        TileTimes::Unit => (1.0, 1.0),
        TileTimes::ByWork => (1.0, consumer.block_cost() / producer.block_cost()),
    };
    let (pg, cg) = (producer.grid(), consumer.grid());
    let stage = |grid, occupancy, time, order| StageSpec::new(grid, occupancy, time, order);
    let stream_sync = simulate_stream_sync(
        &stage(pg, producer.occupancy, p_time, Default::default()),
        &stage(cg, consumer.occupancy, c_time, Default::default()),
        gpu.sms,
    )?;
    let mut policies = Vec::new();
    for &policy in candidates {
        if validate(policy, dependency, pg, cg).is_err() {
            continue;
        }
        let p = stage(pg, producer.occupancy, p_time, policy.producer_order());
        let c = stage(cg, consumer.occupancy, c_time, policy.consumer_order());
        let stats = simulate_fine_grained(&p, &c, dependency, &policy, gpu.sms, options.wait_cost)?;
        policies.push(PolicyOutcome { policy, stats });
    }
    Ok(PairPrediction { stream_sync, policies })
}

/// Policies tried for a GeMM -> GeMM pair.
pub const GEMM_CANDIDATES: [PolicyKind; 2] = [PolicyKind::TileSync, PolicyKind::RowSync];

/// One row of an MLP table.
#[derive(Clone, Debug, PartialEq)]
pub struct MlpRow {
    /// The configuration.
    pub case: MlpCase,
    /// Waves of the two GeMMs.
    pub waves: PairWaves,
    /// Simulated schedules.
    pub prediction: PairPrediction,
}

/// The two GeMM kernels of an MLP case with hidden size `hidden`.
pub fn mlp_kernels(case: &MlpCase, hidden: u32) -> [KernelSpec; 2] {
    let [g1, g2] = mlp_gemms(case.batch, hidden);
    [
        KernelSpec {
            shape: g1,
            tiling: case.gemm1,
            occupancy: case.occupancy,
        },
        KernelSpec {
            shape: g2,
            tiling: case.gemm2,
            occupancy: case.occupancy,
        },
    ]
}

/// Builds an MLP table: waves and predictions for every case.
pub fn mlp_table(gpu: Gpu, cases: &[MlpCase], hidden: u32, options: SimOptions) -> Result<Vec<MlpRow>, ScheduleError> {
    cases
        .iter()
        .map(|case| {
            let [p, c] = mlp_kernels(case, hidden);
            let prediction = predict_pair(gpu, p, c, Dependency::GemmRow, &GEMM_CANDIDATES, options)?;
            Ok(MlpRow {
                case: *case,
                waves: pair_waves(gpu, p, c),
                prediction,
            })
        })
        .collect()
}

/// One row of a Conv2D-pair table.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvRow {
    /// The configuration.
    pub case: ConvCase,
    /// Waves of the two (equal) convolutions.
    pub waves: PairWaves,
    /// Simulated schedules.
    pub prediction: PairPrediction,
}

/// The implicit-GeMM kernel of one convolution of a case, and the dependency between two.
pub fn conv_kernel(case: &ConvCase, layer: Conv2dShape) -> (KernelSpec, Dependency) {
    let kernel = KernelSpec {
        shape: layer.implicit_gemm(),
        tiling: case.tiling,
        occupancy: case.occupancy,
    };
    let halo =
        crate::shared::policy::conv2d_halo_tiles(layer.filter_r, layer.filter_s, layer.width, case.tiling.tile_m);
    (
        kernel,
        Dependency::Conv2D {
            taps: layer.taps(),
            halo,
        },
    )
}

/// Builds a table for two equal 3x3 convolutions on `size x size x channels` images.
pub fn conv_table(
    gpu: Gpu,
    cases: &[ConvCase],
    size: u32,
    channels: u32,
    options: SimOptions,
) -> Result<Vec<ConvRow>, ScheduleError> {
    cases
        .iter()
        .map(|case| {
            let layer = Conv2dShape::resnet_3x3(case.batch, size, channels);
            let (k, dependency) = conv_kernel(case, layer);
            let candidates = [PolicyKind::Conv2DTileSync { taps: layer.taps() }, PolicyKind::RowSync];
            let prediction = predict_pair(gpu, k, k, dependency, &candidates, options)?;
            Ok(ConvRow {
                case: *case,
                waves: pair_waves(gpu, k, k),
                prediction,
            })
        })
        .collect()
}
