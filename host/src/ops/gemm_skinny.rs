//! The skinny GeMM (`M <= 64`): the MLP's small batches, where reading the weight `B` once is
//! the whole cost. Device code in device/src/kernels/gemm/skinny.rs (sm_80+, `mma.sync` on
//! fragments loaded straight from global memory, no shared-memory pipeline); the decomposition
//! is `cusync_shared::skinny`'s: one balanced range of the weight per resident block, partial
//! column blocks summed by their last arrival in a fixed order (deterministic, and nothing
//! ever waits, so nothing can hang).
//!
//! [`super::gemm::Gemm`] uses it by default where [`choose_skinny`] says so and the operands
//! fit ([`operands_fit`]); `GemmConfig::skinny` forces it on (an error where it cannot run) or
//! off.

use super::gemm::{GemmConfig, GemmParamsArg, InputType, Layout};
use crate::{Context, DeviceBuffer, Error, Result, Stream};
use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};
use cusync_shared::gemm::GemmParams;
use cusync_shared::skinny::{SkinnyArgs, SkinnyPlan, SkinnyShape, SKINNY_MAX_M, SKINNY_THREADS};
use std::sync::Mutex;

/// The kernel argument after the [`GemmParams`].
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct SkinnyArgsArg(pub(crate) SkinnyArgs);

// SAFETY: SkinnyArgs is #[repr(C)] plain old data (Pod), the skinny entry points' second
// parameter (shared/src/skinny.rs asserts its size).
unsafe impl DeviceRepr for SkinnyArgsArg {}

/// Why `cfg` cannot run on the skinny kernels (`None`: it can).
pub fn unsupported(cfg: &GemmConfig) -> Option<String> {
    if cfg.m == 0 || cfg.m > SKINNY_MAX_M as usize {
        return Some(format!(
            "M = {} (the skinny kernels take 1 to {SKINNY_MAX_M} rows)",
            cfg.m
        ));
    }
    if (cfg.a_layout, cfg.b_layout) != (Layout::RowMajor, Layout::RowMajor) {
        return Some("a transposed operand (the skinny kernels take A [M,K] and B [K,N] row-major)".into());
    }
    if !cfg.k.is_multiple_of(8) || !cfg.n.is_multiple_of(8) {
        return Some(format!(
            "K = {} and N = {} (the skinny kernels need both multiples of 8)",
            cfg.k, cfg.n
        ));
    }
    match cfg.skinny_cols {
        None | Some(64) => None,
        Some(128) if cfg.m <= 16 => None,
        Some(128) => Some(format!(
            "128-column blocks with M = {} (they take one m16 tile: M <= 16)",
            cfg.m
        )),
        Some(c) => Some(format!("{c}-column blocks (the skinny kernels have 64 or 128)")),
    }
}

/// The skinny kernels' column block width when [`GemmConfig::skinny_cols`] leaves it open.
pub const SKINNY_DEFAULT_COLS: u32 = 64;

/// The kernel shape `cfg` runs on (`cfg` free of [`unsupported`] reasons).
pub fn shape_for(cfg: &GemmConfig) -> SkinnyShape {
    let cols = cfg.skinny_cols.unwrap_or(SKINNY_DEFAULT_COLS);
    SkinnyShape::for_m(cfg.m as u32, cols == 128)
}

/// The largest M the skinny kernels are the default for: one `m16` tile. From 17 rows on,
/// `mma.sync` on two or four tiles loses to path 2's swapped `wgmma` tile (H200, session 12:
/// B = 24 and 32 at 0.72-0.83x cuBLAS against 0.80-0.86x, B = 48 and 64 at 0.34-0.44x).
pub const SKINNY_DEFAULT_MAX_M: usize = 16;

/// Whether [`super::gemm::Gemm`] runs `cfg` on the skinny kernels by default: where they can
/// ([`unsupported`] is `None`), M is at most [`SKINNY_DEFAULT_MAX_M`], and the weight is large
/// enough to stream (`N K >= 2^20`; a small weight's product is a few microseconds on any
/// kernel). Larger M (up to 64) runs skinny only when forced (`GemmConfig::skinny`).
pub fn choose_skinny(cfg: &GemmConfig) -> bool {
    unsupported(cfg).is_none() && cfg.m <= SKINNY_DEFAULT_MAX_M && cfg.n * cfg.k >= 1 << 20
}

/// Whether [`super::gemm::Gemm`] sets the skinny kernels up for `cfg` without being asked:
/// nothing else forced ([`GemmConfig::no_kernel_forced`]) and [`choose_skinny`].
pub fn is_default_for(cfg: &GemmConfig) -> bool {
    cfg.skinny.is_none() && cfg.no_kernel_forced() && choose_skinny(cfg)
}

/// Whether a launch's operands suit the skinny kernels: A and B 16-byte aligned, their
/// leading dimensions multiples of 8 elements (every 16-byte load aligned).
pub fn operands_fit(p: &GemmParams) -> bool {
    p.a.is_multiple_of(16) && p.b.is_multiple_of(16) && p.lda.is_multiple_of(8) && p.ldb.is_multiple_of(8)
}

/// The entry point for `input` and kernel shape `shape`.
pub fn kernel_name(input: InputType, shape: SkinnyShape) -> &'static str {
    match (input, shape.m_tiles, shape.col_vectors) {
        (InputType::Bf16, 1, 2) => "gemm_skinny_bf16_m16_w128",
        (InputType::Bf16, 1, _) => "gemm_skinny_bf16_m16",
        (InputType::Bf16, 2, _) => "gemm_skinny_bf16_m32",
        (InputType::Bf16, _, _) => "gemm_skinny_bf16_m64",
        (InputType::F16, 1, 2) => "gemm_skinny_f16_m16_w128",
        (InputType::F16, 1, _) => "gemm_skinny_f16_m16",
        (InputType::F16, 2, _) => "gemm_skinny_f16_m32",
        (InputType::F16, _, _) => "gemm_skinny_f16_m64",
    }
}

/// A skinny GeMM set up on one device: its kernel, plan, workspace and arrival counters.
#[derive(Debug)]
pub struct SkinnyGemm {
    function: CudaFunction,
    name: &'static str,
    shape: SkinnyShape,
    plan: SkinnyPlan,
    smem: u32,
    workspace: DeviceBuffer<f32>,
    /// One arrival counter per column block; zero between launches. One launch at a time uses
    /// them: launches of one GeMM must not overlap (as for path 2's split-K).
    counters: Mutex<DeviceBuffer<u32>>,
}

impl SkinnyGemm {
    /// Sets up `cfg` (which must be [`unsupported`]-free) on `cx`: the grid is every block
    /// that can be resident at once (occupancy API), the workspace two partial slots a block.
    pub fn new(cx: &Context, cfg: &GemmConfig) -> Result<Self> {
        if let Some(why) = unsupported(cfg) {
            return Err(Error::InvalidArgument(format!("GeMM skinny kernels: {why}")));
        }
        let shape = shape_for(cfg);
        let name = kernel_name(cfg.input, shape);
        let smem = shape.smem_bytes();
        cx.set_max_dynamic_smem(name, smem)?;
        let per_sm = cx.occupancy(name, SKINNY_THREADS, smem)?;
        if per_sm == 0 {
            return Err(Error::InvalidArgument(format!(
                "GeMM skinny kernel `{name}` cannot be resident on this device ({smem} bytes of shared memory, \
                 {SKINNY_THREADS} threads)"
            )));
        }
        let plan = SkinnyPlan::new(cfg.n as u32, cfg.k as u32, shape, per_sm * cx.info().sm_count);
        if plan.chunks() > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "GeMM skinny kernels: N = {} x K = {} is {} chunks, more than the kernels count (2^32)",
                cfg.n,
                cfg.k,
                plan.chunks()
            )));
        }
        let slot = shape.slot_floats() as usize;
        Ok(Self {
            function: cx.function(name)?,
            name,
            shape,
            plan,
            smem,
            workspace: cx.alloc_zeros::<f32>(plan.slots() as usize * slot)?,
            counters: Mutex::new(cx.alloc_zeros::<u32>(plan.col_blocks as usize)?),
        })
    }

    /// The entry point.
    pub fn kernel_name(&self) -> &'static str {
        self.name
    }

    /// The kernel's shape (`m16` tiles, column block width).
    pub fn shape(&self) -> SkinnyShape {
        self.shape
    }

    /// The decomposition: column blocks, chunks per column block, blocks.
    pub fn plan(&self) -> SkinnyPlan {
        self.plan
    }

    /// Zeroes the arrival counters (a completed launch leaves them zeroed; a launch that did not
    /// complete, a killed context, may not).
    pub fn reset(&self) -> Result<()> {
        let mut counters = self
            .counters
            .lock()
            .map_err(|_| Error::InvalidArgument("skinny GeMM counters poisoned".into()))?;
        counters.fill(0)
    }

    fn args_with(&self, counters: u64) -> SkinnyArgs {
        SkinnyArgs {
            workspace: self.workspace.addr(),
            counters,
            col_blocks: self.plan.col_blocks,
            chunks_per_block: self.plan.chunks_per_block,
            ctas: self.plan.ctas,
            _pad: 0,
        }
    }

    /// The kernel argument of a launch of this plan (its workspace and arrival counters), for a
    /// stream-mode stage that launches the plan's [`SkinnyPlan::ctas`] blocks itself. Launches
    /// of one GeMM must not overlap.
    pub fn args(&self) -> Result<SkinnyArgs> {
        let counters = self
            .counters
            .lock()
            .map_err(|_| Error::InvalidArgument("skinny GeMM counters poisoned".into()))?;
        Ok(self.args_with(counters.addr()))
    }

    /// Launches `p` on `stream`.
    ///
    /// # Safety
    /// `p` describes live device memory for this problem until the launch completes (the caller,
    /// [`super::gemm::Gemm`], checked the buffers), and [`operands_fit`] holds; no other launch of
    /// this GeMM runs at the same time.
    pub unsafe fn launch(&self, stream: &Stream, p: &GemmParams) -> Result<()> {
        if !operands_fit(p) {
            return Err(Error::InvalidArgument(
                "GeMM skinny kernels: A and B must be 16-byte aligned with leading dimensions that are \
                 multiples of 8 elements"
                    .into(),
            ));
        }
        let counters = self
            .counters
            .lock()
            .map_err(|_| Error::InvalidArgument("skinny GeMM counters poisoned".into()))?;
        let args = SkinnyArgsArg(self.args_with(counters.addr()));
        let gemm = GemmParamsArg(*p);
        let mut b = stream.raw().launch_builder(&self.function);
        b.arg(&gemm);
        b.arg(&args);
        let cfg = LaunchConfig {
            grid_dim: (self.plan.ctas, 1, 1),
            block_dim: (SKINNY_THREADS, 1, 1),
            shared_mem_bytes: self.smem,
        };
        // SAFETY: the entry point takes (GemmParams, SkinnyArgs) by value; the grid is the plan's
        // and every block is resident (occupancy); the workspace and counters are this plan's;
        // the caller vouches for the operands.
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .map_err(Error::driver("launching a skinny GeMM"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mlp_small_batches_run_skinny_and_others_do_not() {
        for b in [1, 8, 16] {
            assert!(choose_skinny(&GemmConfig::new(b, 6144, 12288)), "B = {b}");
            assert!(choose_skinny(&GemmConfig::new(b, 12288, 6144)), "B = {b}");
        }
        for b in [17, 32, 64, 65] {
            assert!(!choose_skinny(&GemmConfig::new(b, 6144, 12288)), "B = {b}");
        }
        assert!(
            unsupported(&GemmConfig::new(64, 6144, 12288)).is_none(),
            "M = 64 runs when forced"
        );
        assert!(unsupported(&GemmConfig::new(65, 6144, 12288)).is_some());
        assert!(!choose_skinny(&GemmConfig::new(8, 64, 64)), "a small weight");
        assert!(is_default_for(&GemmConfig::new(8, 6144, 12288)));
        assert!(
            !is_default_for(&GemmConfig::new(8, 6144, 12288).split_k(2)),
            "path 2 forced"
        );
        assert!(
            !is_default_for(&GemmConfig::new(8, 6144, 12288).path1_only()),
            "path 1 forced"
        );
        assert!(
            unsupported(&GemmConfig::new(8, 6144, 12290)).is_some(),
            "K not a multiple of 8"
        );
        let t = GemmConfig::new(8, 6144, 12288).layouts(Layout::RowMajor, Layout::Transposed);
        assert!(unsupported(&t).unwrap().contains("transposed"));
        let name = |input, cfg: GemmConfig| kernel_name(input, shape_for(&cfg));
        assert_eq!(
            name(InputType::Bf16, GemmConfig::new(1, 64, 64)),
            "gemm_skinny_bf16_m16"
        );
        assert_eq!(name(InputType::F16, GemmConfig::new(40, 64, 64)), "gemm_skinny_f16_m64");
        let wide = GemmConfig::new(16, 6144, 12288).skinny_cols(128);
        assert!(unsupported(&wide).is_none());
        assert_eq!(name(InputType::Bf16, wide), "gemm_skinny_bf16_m16_w128");
        assert_eq!(name(InputType::F16, wide), "gemm_skinny_f16_m16_w128");
        assert_eq!(shape_for(&wide).cols(), 128);
        assert_eq!(shape_for(&GemmConfig::new(16, 64, 64)).cols(), SKINNY_DEFAULT_COLS);
        assert!(unsupported(&GemmConfig::new(17, 6144, 12288).skinny_cols(128))
            .unwrap()
            .contains("M <= 16"));
        assert!(unsupported(&GemmConfig::new(8, 6144, 12288).skinny_cols(96))
            .unwrap()
            .contains("64 or 128"));
    }

    #[test]
    fn operands_must_be_aligned_for_16_byte_loads() {
        let p = GemmParams::dense(256, 512, 1024, 0, 8, 6144, 12288, 0);
        assert!(operands_fit(&p));
        assert!(!operands_fit(&GemmParams { a: 258, ..p }));
        assert!(!operands_fit(&GemmParams { ldb: 6146, ..p }));
    }
}
