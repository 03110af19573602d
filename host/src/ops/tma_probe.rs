//! The TMA streaming probe (issue 3; `cusync_shared::tma_probe`, device kernel
//! `bench_tma_stream`): blocks stream a row-major weight `[K, N]` through TMA boxes into
//! shared-memory stages, with no arithmetic, under a chosen cut. `cusync run tma-probe` runs one
//! configuration or the sweep of [`TmaProbeConfig::sweep`], each checked (every block's
//! checksum against the CPU's, every block written, no wait timed out) and timed (CUDA events
//! for the launch, `%globaltimer` per block for the tail).

use super::gemm::{median, InputType};
use super::gemm_sm90::{device_supports, encode_map_2d, L2Promotion, MapSwizzle};
use crate::cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use crate::runtime::ErrorSlotBuffer;
use crate::{Context, Error, Result};
use cusync_shared::gemm_sm90::split_range;
use cusync_shared::layout::DEFAULT_TIMEOUT_NS;
use cusync_shared::stream_k::StreamKPlan;
use cusync_shared::tma_probe::{
    segment_checksum, ProbeBlock, ProbeSegment, ProbeStage, TmaProbeParams, PROBE_BK, PROBE_MAX_STAGES,
    PROBE_STAGE_QUANTUM, PROBE_THREADS,
};
use rand::{Rng, SeedableRng};
use std::fmt::Write;

/// The entry point.
const KERNEL: &str = "bench_tma_stream";
/// Dynamic shared memory a block may take on sm_90 (227 KiB).
const SM90_MAX_SMEM: u32 = 232_448;
/// Untimed launches before the timed ones in [`tma_probe_table`].
const TABLE_WARMUP: usize = 5;
/// A block this much slower than the median is slow (as `cusync trace analyze` counts).
const SLOW_FACTOR: f64 = 1.10;

/// How the weight's strips are divided among blocks (one block per SM at most).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeDivision {
    /// One unit per strip, whole K; block `b` takes units `b, b + blocks, ...`.
    Strips,
    /// Each strip cut into this many K ranges (the GeMM's split-K); dealt like strips.
    Split(u32),
    /// The strips' K-steps laid end to end and cut into this many equal ranges, one per block
    /// (the GeMM's stream-K with no data-parallel tiles: ranges cross strip edges).
    Ranges(u32),
}

impl ProbeDivision {
    /// Parses `strips`, `split:S` or `ranges:R`.
    pub fn parse(s: &str) -> Result<Self> {
        let num = |v: &str| {
            v.parse::<u32>()
                .ok()
                .filter(|&x| x > 0)
                .ok_or_else(|| Error::InvalidArgument(format!("probe division {s:?}: {v:?} is not a positive count")))
        };
        if s == "strips" {
            Ok(Self::Strips)
        } else if let Some(v) = s.strip_prefix("split:") {
            Ok(Self::Split(num(v)?))
        } else if let Some(v) = s.strip_prefix("ranges:") {
            Ok(Self::Ranges(num(v)?))
        } else {
            Err(Error::InvalidArgument(format!(
                "probe division {s:?}: expected strips, split:S or ranges:R"
            )))
        }
    }

    fn label(self) -> String {
        match self {
            Self::Strips => "strips".into(),
            Self::Split(s) => format!("split:{s}"),
            Self::Ranges(r) => format!("ranges:{r}"),
        }
    }
}

/// One probe configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaProbeConfig {
    /// Rows of the weight (K).
    pub k: usize,
    /// Columns of the weight (N), a multiple of `strip_cols`.
    pub n: usize,
    /// Rows of the batch operand `[batch, K]` (0: no batch box is loaded).
    pub batch: usize,
    /// Rows of the batch box a stage loads: 64 or 128 (rows past `batch` are zero-filled), or
    /// 0 for none.
    pub batch_box_rows: u32,
    /// Weight columns of a strip (a stage's weight: `strip_cols` x 64 K-rows).
    pub strip_cols: u32,
    /// Width of the strip's boxes: 16, 32 or 64 columns (32-, 64-, 128-byte swizzle); a
    /// remainder of 16 or 32 columns is one narrower box.
    pub box_cols: u32,
    /// Pipeline stages.
    pub stages: u32,
    /// L2 promotion of the weight's maps.
    pub promotion: L2Promotion,
    /// How the strips are divided among blocks.
    pub division: ProbeDivision,
}

impl TmaProbeConfig {
    /// The GPT-3 MLP's B = 64 GeMM2 weight as our swapped 128 x 64 tile streams it: 96 strips of
    /// 128 columns (two 64-column boxes), a 64-row batch box, 9 stages, one block a strip.
    pub fn gemm2_b64() -> Self {
        Self {
            k: 6144,
            n: 12288,
            batch: 64,
            batch_box_rows: 64,
            strip_cols: 128,
            box_cols: 64,
            stages: 9,
            promotion: L2Promotion::B256,
            division: ProbeDivision::Strips,
        }
    }

    /// The sweep `cusync run tma-probe --sweep` runs on `base`'s weight: `base` (the B = 64
    /// GeMM2's whole tiles by default) under every L2 promotion, then 96-column strips divided
    /// as `base` is (on the MLP's widths 128 blocks: cuBLAS's B = 64 cut) as three 32-column
    /// boxes with the 128- and the 64-row batch box and as 64 + 32, under every promotion, then
    /// stage counts, the stream-K ranges the GeMM's forced runs used, a split, and no batch box.
    pub fn sweep(base: Self) -> Vec<Self> {
        let mut v = vec![base];
        let proms = [L2Promotion::B256, L2Promotion::B128, L2Promotion::None];
        for promotion in proms {
            if promotion != base.promotion {
                v.push(Self { promotion, ..base });
            }
        }
        let s96 = |box_cols, batch_box_rows, stages, promotion| Self {
            strip_cols: 96,
            box_cols,
            batch_box_rows,
            stages,
            promotion,
            ..base
        };
        for promotion in proms {
            // The 128 x 96 tile of branch s29-tile16 (8 stages, 128-row batch box), and what
            // cuBLAS's 96 x 64 kernel carries (8 stages, 64 batch rows).
            v.push(s96(32, 128, 8, promotion));
            v.push(s96(32, 64, 8, promotion));
            v.push(s96(64, 64, 8, promotion));
        }
        for stages in [4, 6, 10, 11] {
            v.push(s96(64, 64, stages, L2Promotion::B256));
        }
        for stages in [4, 6] {
            v.push(Self { stages, ..base });
        }
        for r in [96, 120, 128, 132] {
            v.push(Self {
                division: ProbeDivision::Ranges(r),
                ..base
            });
        }
        v.push(Self {
            division: ProbeDivision::Split(2),
            ..base
        });
        v.push(Self {
            batch_box_rows: 0,
            ..base
        });
        v
    }

    /// The stage layout, checked.
    pub fn stage(&self) -> Result<ProbeStage> {
        let bad = |why: String| Err(Error::InvalidArgument(format!("tma probe: {why}")));
        if !matches!(self.box_cols, 16 | 32 | 64) {
            return bad(format!("boxes of {} columns (16, 32 or 64)", self.box_cols));
        }
        let rem = self.strip_cols % self.box_cols;
        if self.strip_cols == 0 || !matches!(rem, 0 | 16 | 32) {
            return bad(format!(
                "strips of {} columns in boxes of {}: the remainder must be 0, 16 or 32 columns",
                self.strip_cols, self.box_cols
            ));
        }
        if !matches!(self.batch_box_rows, 0 | 64 | 128) {
            return bad(format!("a batch box of {} rows (0, 64 or 128)", self.batch_box_rows));
        }
        if self.batch_box_rows != 0 && self.batch == 0 {
            return bad("a batch box with no batch rows".into());
        }
        let stage = ProbeStage {
            wide_boxes: self.strip_cols / self.box_cols,
            wide_cols: self.box_cols,
            narrow_boxes: (rem != 0) as u32,
            narrow_cols: rem,
            batch_box_rows: self.batch_box_rows,
        };
        if !stage.stage_bytes().is_multiple_of(PROBE_STAGE_QUANTUM) {
            return bad(format!(
                "a stage of {} bytes (a multiple of {PROBE_STAGE_QUANTUM} is needed)",
                stage.stage_bytes()
            ));
        }
        if !(2..=PROBE_MAX_STAGES).contains(&self.stages) {
            return bad(format!("{} stages (2 to {PROBE_MAX_STAGES})", self.stages));
        }
        if stage.smem_bytes(self.stages) > SM90_MAX_SMEM {
            return bad(format!(
                "{} stages of {} bytes take {} bytes of shared memory (at most {SM90_MAX_SMEM})",
                self.stages,
                stage.stage_bytes(),
                stage.smem_bytes(self.stages)
            ));
        }
        Ok(stage)
    }

    /// The blocks' segments on `sms` SMs, checked.
    pub fn plan(&self, sms: u32) -> Result<ProbePlan> {
        let bad = |why: String| Err(Error::InvalidArgument(format!("tma probe: {why}")));
        if self.k == 0 || self.n == 0 || self.k > u32::MAX as usize / 2 || self.n > u32::MAX as usize / 2 {
            return bad(format!("a weight of [{}, {}]", self.k, self.n));
        }
        if self.strip_cols == 0 || !self.n.is_multiple_of(self.strip_cols as usize) {
            return bad(format!(
                "N = {} is not a multiple of the strip width {}",
                self.n, self.strip_cols
            ));
        }
        if !self.n.is_multiple_of(8) || !self.k.is_multiple_of(8) {
            return bad(format!(
                "K = {} and N = {} must be multiples of 8 (16-byte rows for TMA)",
                self.k, self.n
            ));
        }
        let strips = (self.n / self.strip_cols as usize) as u32;
        let k_steps = self.k.div_ceil(PROBE_BK as usize) as u32;
        let seg = |strip: u32, (k_begin, k_end): (u32, u32)| ProbeSegment {
            col0: strip * self.strip_cols,
            k_begin,
            k_end,
            _pad: 0,
        };
        let units: Vec<Vec<ProbeSegment>> = match self.division {
            ProbeDivision::Strips => (0..strips).map(|s| vec![seg(s, (0, k_steps))]).collect(),
            ProbeDivision::Split(splits) => {
                if splits > k_steps {
                    return bad(format!("{splits} splits of {k_steps} K-steps"));
                }
                (0..strips * splits)
                    .map(|u| vec![seg(u / splits, split_range(k_steps, u % splits, splits))])
                    .collect()
            }
            ProbeDivision::Ranges(r) => {
                if r > sms {
                    return bad(format!("{r} ranges on {sms} SMs (one block each)"));
                }
                let plan = StreamKPlan {
                    tiles: strips,
                    k_steps,
                    dp_tiles: 0,
                    sk_units: r,
                };
                (0..r)
                    .map(|u| match plan.unit_tiles(u) {
                        None => Vec::new(),
                        Some((first, last)) => (first..=last)
                            .map(|t| {
                                let s = plan.segment(u, t);
                                seg(t, (s.k_begin, s.k_end))
                            })
                            .collect(),
                    })
                    .collect()
            }
        };
        let blocks = (units.len() as u32).min(sms).max(1);
        let mut per_block: Vec<Vec<ProbeSegment>> = vec![Vec::new(); blocks as usize];
        for (u, segs) in units.into_iter().enumerate() {
            per_block[u % blocks as usize].extend(segs);
        }
        let mut offsets = vec![0u32];
        let mut segments = Vec::new();
        for segs in per_block {
            segments.extend(segs);
            offsets.push(segments.len() as u32);
        }
        Ok(ProbePlan {
            blocks,
            segments,
            offsets,
        })
    }

    /// One line naming the configuration.
    pub fn label(&self) -> String {
        let stage = self.stage().ok();
        let boxes = match stage {
            Some(s) if s.narrow_boxes != 0 => format!("{}x{}+{}", s.wide_boxes, s.wide_cols, s.narrow_cols),
            Some(s) => format!("{}x{}", s.wide_boxes, s.wide_cols),
            None => format!("?{}", self.box_cols),
        };
        let batch = if self.batch_box_rows == 0 {
            "no batch".to_string()
        } else {
            format!("batch box {}", self.batch_box_rows)
        };
        format!(
            "{} cols ({boxes}), {} st, {batch}, L2 {}, {}",
            self.strip_cols,
            self.stages,
            self.promotion.name(),
            self.division.label()
        )
    }
}

/// The blocks' work: block `b` runs `segments[offsets[b]..offsets[b + 1]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbePlan {
    /// Blocks of the launch (at most one per SM).
    pub blocks: u32,
    /// Every block's segments, block by block.
    pub segments: Vec<ProbeSegment>,
    /// `blocks + 1` offsets into `segments`.
    pub offsets: Vec<u32>,
}

impl ProbePlan {
    /// Block `b`'s segments.
    pub fn block(&self, b: usize) -> &[ProbeSegment] {
        &self.segments[self.offsets[b] as usize..self.offsets[b + 1] as usize]
    }

    /// K-steps block `b` streams.
    pub fn steps(&self, b: usize) -> u32 {
        self.block(b).iter().map(|s| s.k_end - s.k_begin).sum()
    }
}

/// What one probe configuration gave.
#[derive(Clone, Debug)]
pub struct ProbeReport {
    /// The configuration.
    pub config: TmaProbeConfig,
    /// Blocks of the launch.
    pub blocks: u32,
    /// Median launch time (CUDA events), ms.
    pub ms: f64,
    /// Median block time (`t_end - t_start`), µs, of the checked launch.
    pub block_median_us: f64,
    /// Longest block time, µs.
    pub block_longest_us: f64,
    /// The SMs of the blocks at least `SLOW_FACTOR` (1.10) times the median, slowest first.
    pub slow_sms: Vec<u32>,
    /// First block start to last block end, µs.
    pub span_us: f64,
    /// Median time from a block's start to its first stage landing, µs.
    pub first_load_us: f64,
    /// Weight bytes streamed (each once).
    pub weight_bytes: f64,
}

impl ProbeReport {
    /// Blocks at least `SLOW_FACTOR` (1.10) times the median.
    pub fn slow_blocks(&self) -> usize {
        self.slow_sms.len()
    }

    /// Weight bytes over the span, TB/s.
    pub fn span_tbs(&self) -> f64 {
        self.weight_bytes / (self.span_us * 1e-6) / 1e12
    }

    /// Weight bytes over the launch's event time, TB/s.
    pub fn event_tbs(&self) -> f64 {
        self.weight_bytes / (self.ms * 1e-3) / 1e12
    }

    /// The table's header ([`ProbeReport::row`]).
    pub fn header() -> String {
        format!(
            "{:<62} {:>6} {:>8} {:>7} {:>8} {:>8} {:>5} {:>8} {:>7} {:>7}  {}",
            "configuration",
            "blocks",
            "ms",
            "TB/s",
            "med µs",
            "long µs",
            "slow",
            "span µs",
            "span TB",
            "1st µs",
            "slow SMs"
        )
    }

    /// One row of the table.
    pub fn row(&self) -> String {
        format!(
            "{:<62} {:>6} {:>8.4} {:>7.2} {:>8.1} {:>8.1} {:>5} {:>8.1} {:>7.2} {:>7.2}  {}",
            self.config.label(),
            self.blocks,
            self.ms,
            self.event_tbs(),
            self.block_median_us,
            self.block_longest_us,
            self.slow_blocks(),
            self.span_us,
            self.span_tbs(),
            self.first_load_us,
            self.slow_sms
                .iter()
                .map(|sm| sm.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    }
}

/// The kernel parameter by value.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
struct ProbeParamsArg(TmaProbeParams);

// SAFETY: TmaProbeParams is #[repr(C)] plain old data (Pod) with the layout the entry point
// takes by value (asserted in shared/src/tma_probe.rs).
unsafe impl DeviceRepr for ProbeParamsArg {}

/// A weight and a batch operand of fresh random bits on the device, kept with their host
/// copies for the checksums.
pub struct ProbeOperands {
    k: usize,
    n: usize,
    batch: usize,
    w: Vec<u16>,
    x: Vec<u16>,
    w_dev: crate::runtime::DeviceBuffer<u16>,
    x_dev: crate::runtime::DeviceBuffer<u16>,
}

impl ProbeOperands {
    /// Random `[k, n]` weight and `[batch, k]` batch operand (fresh seed each call).
    pub fn new(cx: &Context, k: usize, n: usize, batch: usize) -> Result<Self> {
        let mut rng = rand::rngs::StdRng::from_os_rng();
        let w: Vec<u16> = (0..k * n).map(|_| rng.random()).collect();
        let x: Vec<u16> = (0..batch.max(1) * k).map(|_| rng.random()).collect();
        Ok(Self {
            k,
            n,
            batch,
            w_dev: cx.upload(&w)?,
            x_dev: cx.upload(&x)?,
            w,
            x,
        })
    }
}

/// Runs `cfg` on `ops` (its shape): `warmup` untimed launches and `iters` timed ones, then one
/// launch into a poisoned result array whose every block is checked. Errors when a block's
/// checksum or step count is wrong, a block wrote nothing, or a wait timed out.
pub fn run_tma_probe(
    cx: &Context,
    ops: &ProbeOperands,
    cfg: &TmaProbeConfig,
    warmup: usize,
    iters: usize,
) -> Result<ProbeReport> {
    if !device_supports(cx) {
        return Err(Error::InvalidArgument(
            "tma probe: needs an sm_90 device and the sm_90a build (TMA)".into(),
        ));
    }
    if (cfg.k, cfg.n, cfg.batch) != (ops.k, ops.n, ops.batch) {
        return Err(Error::InvalidArgument(format!(
            "tma probe: operands of [{}, {}] batch {} for a configuration of [{}, {}] batch {}",
            ops.k, ops.n, ops.batch, cfg.k, cfg.n, cfg.batch
        )));
    }
    let stage = cfg.stage()?;
    let plan = cfg.plan(cx.info().sm_count)?;
    let smem = stage.smem_bytes(cfg.stages);
    let maps = encode_maps(ops, cfg, &stage)?;
    let maps_dev = cx.upload(&maps)?;
    // As words (a segment is four u32s); one zero segment where no block has any.
    let seg_words: Vec<u32> = if plan.segments.is_empty() {
        vec![0; 4]
    } else {
        bytemuck::cast_slice(&plan.segments).to_vec()
    };
    let segments = cx.upload(&seg_words)?;
    let offsets = cx.upload(&plan.offsets)?;
    let out_words = plan.blocks as usize * std::mem::size_of::<ProbeBlock>() / 4;
    let mut out = cx.alloc_zeros::<u32>(out_words)?;
    let error = ErrorSlotBuffer::new(cx)?;
    cx.set_max_dynamic_smem(KERNEL, smem)?;
    let f = cx.function(KERNEL)?;
    let params = ProbeParamsArg(TmaProbeParams {
        maps: maps_dev.addr(),
        segments: segments.addr(),
        block_segments: offsets.addr(),
        out: out.addr(),
        error: error.addr(),
        timeout_ns: DEFAULT_TIMEOUT_NS,
        stage,
        stages: cfg.stages,
    });
    let stream = cx.new_stream()?;
    let launch = |stream: &crate::runtime::Stream| -> Result<()> {
        let mut b = stream.raw().launch_builder(&f);
        b.arg(&params);
        let lc = LaunchConfig {
            grid_dim: (plan.blocks, 1, 1),
            block_dim: (PROBE_THREADS, 1, 1),
            shared_mem_bytes: smem,
        };
        // SAFETY: the entry point takes one TmaProbeParams by value; the maps, segments,
        // offsets (blocks + 1), result array (one ProbeBlock per block) and error slot live
        // until the stream is synchronized below; `smem` is the stage layout's size, allowed
        // above; `cfg.stage()` checked the stage count and size.
        unsafe { b.launch(lc) }
            .map(|_| ())
            .map_err(Error::driver("launching the tma probe"))
    };
    let mut samples = Vec::with_capacity(iters);
    let timed = (|| -> Result<()> {
        for _ in 0..warmup {
            launch(&stream)?;
        }
        let mut events = Vec::with_capacity(iters);
        for _ in 0..iters {
            let (start, end) = (cx.new_event()?, cx.new_event()?);
            stream.record(&start)?;
            launch(&stream)?;
            stream.record(&end)?;
            events.push((start, end));
        }
        stream.synchronize()?;
        for (s, e) in &events {
            samples.push(s.elapsed_ms(e)?);
        }
        Ok(())
    })();
    let synced = stream.synchronize();
    timed?;
    synced?;
    error.check()?;
    // The checked launch: every block must overwrite its poisoned result.
    out.fill(u32::MAX)?;
    launch(&stream)?;
    stream.synchronize()?;
    error.check()?;
    let words = out.download()?;
    let blocks: Vec<ProbeBlock> = bytemuck::cast_slice::<u32, ProbeBlock>(&words).to_vec();
    check_blocks(ops, cfg, &stage, &plan, &blocks)?;
    Ok(summarize(cfg, &plan, &samples, &blocks))
}

/// The three maps (wide boxes, narrow boxes, batch box) as the kernel reads them.
fn encode_maps(ops: &ProbeOperands, cfg: &TmaProbeConfig, stage: &ProbeStage) -> Result<Vec<u64>> {
    let mut words = vec![0u64; 48];
    let weight = |cols: u32| -> Result<[u64; 16]> {
        let swizzle = MapSwizzle::for_row_bytes(cols * 2)
            .ok_or_else(|| Error::InvalidArgument(format!("tma probe: no swizzle for boxes of {cols} columns")))?;
        encode_map_2d(
            InputType::Bf16,
            ops.w_dev.addr(),
            [ops.n as u32, ops.k as u32],
            [cols, PROBE_BK],
            ops.n as u32,
            swizzle,
            cfg.promotion,
        )
    };
    words[..16].copy_from_slice(&weight(stage.wide_cols)?);
    if stage.narrow_boxes != 0 {
        words[16..32].copy_from_slice(&weight(stage.narrow_cols)?);
    }
    if stage.batch_box_rows != 0 {
        let m = encode_map_2d(
            InputType::Bf16,
            ops.x_dev.addr(),
            [ops.k as u32, ops.batch as u32],
            [PROBE_BK, stage.batch_box_rows],
            ops.k as u32,
            MapSwizzle::B128,
            L2Promotion::B256,
        )?;
        words[32..].copy_from_slice(&m);
    }
    Ok(words)
}

/// Every block wrote its result, took its planned steps and loaded exactly its segments' bytes.
fn check_blocks(
    ops: &ProbeOperands,
    cfg: &TmaProbeConfig,
    stage: &ProbeStage,
    plan: &ProbePlan,
    blocks: &[ProbeBlock],
) -> Result<()> {
    for (b, r) in blocks.iter().enumerate() {
        let fail = |why: String| {
            Err(Error::Verification(format!(
                "tma probe {}: block {b} (SM {}): {why}",
                cfg.label(),
                r.sm
            )))
        };
        if r.written != 1 {
            return fail("wrote no result (the poison is still there)".into());
        }
        if r.steps != plan.steps(b) {
            return fail(format!("took {} stages, planned {}", r.steps, plan.steps(b)));
        }
        let want = plan.block(b).iter().fold(0u32, |acc, seg| {
            acc ^ segment_checksum(&ops.w, ops.k, ops.n, &ops.x, ops.batch, stage, seg)
        });
        if r.checksum != want {
            return fail(format!("checksum {:#010x}, expected {want:#010x}", r.checksum));
        }
        if r.t_end < r.t_start || (r.steps > 0 && (r.t_first < r.t_start || r.t_first > r.t_end)) {
            return fail(format!(
                "timestamps out of order: start {}, first stage {}, end {}",
                r.t_start, r.t_first, r.t_end
            ));
        }
    }
    Ok(())
}

fn summarize(cfg: &TmaProbeConfig, plan: &ProbePlan, samples: &[f32], blocks: &[ProbeBlock]) -> ProbeReport {
    let us = |ns: u64| ns as f64 * 1e-3;
    // Each block's time and SM, fastest first.
    let mut timed: Vec<(f64, u32)> = blocks.iter().map(|b| (us(b.t_end - b.t_start), b.sm)).collect();
    timed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let med = timed.get(timed.len() / 2).map_or(0.0, |t| t.0);
    let mut firsts: Vec<f64> = blocks
        .iter()
        .filter(|b| b.steps > 0)
        .map(|b| us(b.t_first - b.t_start))
        .collect();
    firsts.sort_by(f64::total_cmp);
    let start = blocks.iter().map(|b| b.t_start).min().unwrap_or(0);
    let end = blocks.iter().map(|b| b.t_end).max().unwrap_or(0);
    ProbeReport {
        config: *cfg,
        blocks: plan.blocks,
        ms: median(samples),
        block_median_us: med,
        block_longest_us: timed.last().map_or(0.0, |t| t.0),
        slow_sms: timed
            .iter()
            .rev()
            .take_while(|&&(t, _)| t >= SLOW_FACTOR * med)
            .map(|&(_, sm)| sm)
            .collect(),
        span_us: us(end - start),
        first_load_us: firsts.get(firsts.len() / 2).copied().unwrap_or(0.0),
        weight_bytes: (cfg.k * cfg.n * 2) as f64,
    }
}

/// Runs every configuration (one shape: each must share `configs[0]`'s K, N and batch) and
/// returns the table: a header, one row each, and a note on how to read it. `progress` is
/// called after each configuration with its row.
pub fn tma_probe_table(
    cx: &Context,
    configs: &[TmaProbeConfig],
    iters: usize,
    mut progress: impl FnMut(&str),
) -> Result<String> {
    let Some(first) = configs.first() else {
        return Err(Error::InvalidArgument("tma probe: no configuration".into()));
    };
    let ops = ProbeOperands::new(cx, first.k, first.n, first.batch)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tma probe: weight [{}, {}] ({:.1} MB) streamed once, batch {} rows; {} warm-up + {iters} timed launches each",
        first.k,
        first.n,
        (first.k * first.n * 2) as f64 / 1e6,
        first.batch,
        TABLE_WARMUP
    );
    let _ = writeln!(s, "{}", ProbeReport::header());
    for cfg in configs {
        let r = run_tma_probe(cx, &ops, cfg, TABLE_WARMUP, iters)?;
        progress(&r.row());
        let _ = writeln!(s, "{}", r.row());
    }
    let _ = writeln!(
        s,
        "ms: median launch (events); TB/s: weight bytes over it; med/long µs: blocks' times; slow: blocks at \
         >= {SLOW_FACTOR:.2}x the median (their SMs last, slowest first); span: first start to last end; 1st µs: \
         median first-stage latency"
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(cfg: &TmaProbeConfig, sms: u32) -> (ProbePlan, Vec<u32>) {
        let plan = cfg.plan(sms).unwrap();
        let strips = cfg.n / cfg.strip_cols as usize;
        let k_steps = cfg.k.div_ceil(64);
        let mut hits = vec![0u32; strips * k_steps];
        for seg in &plan.segments {
            assert_eq!(seg.col0 % cfg.strip_cols, 0);
            for kt in seg.k_begin..seg.k_end {
                hits[(seg.col0 / cfg.strip_cols) as usize * k_steps + kt as usize] += 1;
            }
        }
        (plan, hits)
    }

    #[test]
    fn every_division_streams_every_strip_step_once() {
        // gpu-check's two sweeps: the B = 64 GeMM2 weight, and GeMM1's split in two.
        let gemm1 = TmaProbeConfig {
            k: 12288,
            n: 6144,
            division: ProbeDivision::Split(2),
            ..TmaProbeConfig::gemm2_b64()
        };
        for cfg in [
            TmaProbeConfig::sweep(TmaProbeConfig::gemm2_b64()),
            TmaProbeConfig::sweep(gemm1),
        ]
        .concat()
        {
            cfg.stage().unwrap_or_else(|e| panic!("{}: {e}", cfg.label()));
            let (plan, hits) = covered(&cfg, 132);
            assert!(hits.iter().all(|&h| h == 1), "{}", cfg.label());
            assert!(plan.blocks <= 132);
            assert_eq!(plan.offsets.len(), plan.blocks as usize + 1);
            let total: u32 = (0..plan.blocks as usize).map(|b| plan.steps(b)).sum();
            assert_eq!(total as usize, hits.len());
        }
    }

    #[test]
    fn divisions_cut_as_the_gemm_does() {
        let base = TmaProbeConfig::gemm2_b64();
        assert_eq!(TmaProbeConfig::sweep(base).len(), 24);
        // 96 strips of 128 columns: 96 blocks of 96 K-steps.
        let plan = base.plan(132).unwrap();
        assert_eq!(plan.blocks, 96);
        assert!((0..96).all(|b| plan.steps(b) == 96 && plan.block(b).len() == 1));
        // 96-column strips: 128 blocks.
        let s96 = TmaProbeConfig {
            strip_cols: 96,
            box_cols: 32,
            ..base
        };
        assert_eq!(s96.plan(132).unwrap().blocks, 128);
        // 128 stream-K ranges: 72 K-steps each, three in four crossing a strip's edge.
        let r = TmaProbeConfig {
            division: ProbeDivision::Ranges(128),
            ..base
        }
        .plan(132)
        .unwrap();
        assert_eq!(r.blocks, 128);
        assert!((0..128).all(|b| r.steps(b) == 72));
        assert_eq!((0..128).filter(|&b| r.block(b).len() == 2).count(), 64);
        assert_eq!(
            r.block(1)[0],
            ProbeSegment {
                col0: 0,
                k_begin: 72,
                k_end: 96,
                _pad: 0
            }
        );
        // Split 2 of 96 strips: 192 units dealt over 132 blocks, the first 60 take two.
        let sp = TmaProbeConfig {
            division: ProbeDivision::Split(2),
            ..base
        }
        .plan(132)
        .unwrap();
        assert_eq!(sp.blocks, 132);
        assert_eq!(sp.steps(0), 96);
        assert_eq!(sp.steps(131), 48);
    }

    #[test]
    fn summaries_name_the_slow_blocks_sms_and_the_span() {
        let cfg = TmaProbeConfig::gemm2_b64();
        let plan = ProbePlan {
            blocks: 4,
            segments: Vec::new(),
            offsets: vec![0; 5],
        };
        let block = |sm, start, first, end| ProbeBlock {
            checksum: 0,
            steps: 1,
            sm,
            written: 1,
            t_start: start,
            t_first: first,
            t_end: end,
        };
        // Times 40, 41, 46 and 60 µs (median 46: the upper middle of four); 60 is slow.
        let blocks = [
            block(7, 1_000, 2_000, 41_000),
            block(3, 0, 1_500, 41_000),
            block(9, 2_000, 3_000, 48_000),
            block(1, 500, 2_500, 60_500),
        ];
        let r = summarize(&cfg, &plan, &[0.05, 0.06, 0.055], &blocks);
        assert_eq!((r.block_median_us, r.block_longest_us), (46.0, 60.0));
        assert_eq!((r.slow_blocks(), r.slow_sms.clone()), (1, vec![1]));
        assert_eq!(r.span_us, 60.5);
        assert_eq!(r.first_load_us, 1.5);
        assert!((r.ms - 0.055).abs() < 1e-6, "{}", r.ms);
        assert!((r.span_tbs() - cfg.k as f64 * cfg.n as f64 * 2.0 / 60.5e-6 / 1e12).abs() < 1e-9);
        assert!(r.row().ends_with("  1"), "{}", r.row());
    }

    #[test]
    fn bad_configurations_are_refused_before_launch() {
        let base = TmaProbeConfig::gemm2_b64();
        let err = |c: TmaProbeConfig| match c.stage().and_then(|_| c.plan(132)) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{} accepted", c.label()),
        };
        assert!(err(TmaProbeConfig { box_cols: 48, ..base }).contains("16, 32 or 64"));
        assert!(err(TmaProbeConfig {
            strip_cols: 100,
            ..base
        })
        .contains("remainder"));
        assert!(err(TmaProbeConfig { stages: 1, ..base }).contains("2 to 16"));
        assert!(err(TmaProbeConfig { stages: 12, ..base }).contains("shared memory"));
        assert!(err(TmaProbeConfig { n: 12280, ..base }).contains("multiple of the strip"));
        assert!(err(TmaProbeConfig {
            division: ProbeDivision::Ranges(200),
            ..base
        })
        .contains("200 ranges on 132 SMs"));
        assert!(err(TmaProbeConfig { batch: 0, ..base }).contains("no batch rows"));
        assert!(err(TmaProbeConfig {
            batch_box_rows: 32,
            ..base
        })
        .contains("0, 64 or 128"));
        assert!(ProbeDivision::parse("ranges:0").is_err());
        assert_eq!(ProbeDivision::parse("split:3").unwrap(), ProbeDivision::Split(3));
        assert_eq!(L2Promotion::parse("none").unwrap(), L2Promotion::None);
        assert!(L2Promotion::parse("512").is_err());
    }
}
