//! Tensor-core GeMM: `C[M,N] = epilogue(A[M,K] x B[K,N])`. Path 1 (`cp.async` + `ldmatrix` +
//! `mma.sync`, device/src/kernels/gemm, sm_80+) and path 2 (TMA + `wgmma`, warp-specialized and
//! persistent, sm_90a: [`super::gemm_sm90`]) compute the same thing; [`Gemm`] uses path 2 where
//! it applies unless a path-1 tile is forced. For M <= 16 with row-major operands the skinny
//! kernels ([`super::gemm_skinny`]: the weight streamed through a `cp.async` ring, sm_80+) are the
//! default for untraced launches ([`GemmConfig::skinny`]).
//!
//! * inputs bf16 or f16 ([`InputType`]), f32 accumulation, output bf16, f16 or f32 ([`OutputType`]);
//! * A row-major `[M, K]` or transposed (stored `[K, M]`), B row-major `[K, N]` or transposed
//!   (stored `[N, K]`) ([`Layout`]); C row-major `[M, N]`; all dense (leading dimension = the
//!   stored row length);
//! * epilogue none, bias (f32, one per column of C), GeLU (tanh approximation, as Megatron-LM's
//!   `bias_gelu`), or bias then GeLU ([`Epilogue`]);
//! * any `M, N, K >= 1`. Operands whose rows are 16-byte aligned (K, or M/N for the transposed
//!   layouts, a multiple of 8) take the 16-byte `cp.async` path; others are loaded element by
//!   element (correct, slower). Edges are zero-filled on load and guarded on store.
//!
//! [`Gemm`] validates a [`GemmConfig`] once (shapes, grid limits, shared memory) and then each
//! launch's buffers (dtype, length, device, alignment, stream) before anything is launched;
//! every refusal is an [`Error::InvalidArgument`] that names what is wrong.
//!
//! Tile choice ([`choose_tile`]): 256 x 128 (8 warps of 64 x 64) for large outputs, 128 x 128
//! (8 warps of 64 x 32) for medium ones, 64 x 64 (4 warps of 32 x 32) for skinny (M or N at
//! most 64) and small ones.
//!
//! [`reference_gemm`] / [`reference_gemm_at`] are the f64 CPU reference (tests, benches);
//! [`time_gemm`] times one configuration with CUDA events.
//!
//! Modules, all re-exported here: `config` (the problem's types, path 1's tiles, [`GemmConfig`]),
//! `validate` (each launch's buffers, traced events read back), `reference` (the f64 CPU
//! reference) and `timing` (CUDA-event timing on random operands); [`Gemm`] stays here.
//!
//! Tracing: [`Gemm::launch_traced`] has the plain kernel (either path) write one
//! [`TraceEvent`] per output tile into a buffer from [`crate::stream::trace_buffer`]
//! ([`Gemm::trace_tiles`] says how many); [`Gemm::trace_events`] reads them back, checked, as
//! one stage of a [`crate::trace::Trace`] (StreamSync's timeline beside a pipelined one).

use super::gemm_skinny::{self, SkinnyGemm};
use super::gemm_sm90::{self, choose_plain_wg_tile, choose_swap_ab, Sm90Gemm, WgTile};
use crate::runtime::Element;
use crate::{Context, DeviceBuffer, Error, Result, Stream};
use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};
use cusync_shared::gemm::GemmParams;
use cusync_shared::layout::TraceEvent;
use cusync_shared::Grid;

mod config;
mod reference;
mod timing;
mod validate;

pub use config::*;
pub use reference::*;
pub use timing::*;
pub use validate::*;

/// [`GemmParams`] as a kernel argument (passed by value, 72 bytes).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct GemmParamsArg(pub GemmParams);

// SAFETY: GemmParams is #[repr(C)] plain old data (Pod); every GeMM entry point takes it by value
// with the same layout (shared/src/gemm.rs asserts size and offsets).
unsafe impl DeviceRepr for GemmParamsArg {}

/// A validated GeMM on one device: the problem, its tile configuration and its kernel.
#[derive(Debug)]
pub struct Gemm {
    cfg: GemmConfig,
    tile: TileConfig,
    function: CudaFunction,
    ordinal: usize,
    path2: Option<Sm90Gemm>,
    skinny: Option<SkinnyGemm>,
}

impl Gemm {
    /// Validates `cfg` for `cx`'s device, picks the tile (unless forced) and allows the kernel
    /// its dynamic shared memory.
    ///
    /// Path 2 (sm_90a: TMA + wgmma) is set up when no path-1 tile is forced, path 2 is allowed
    /// and the device runs it, or when a path-2 tile is forced (an error where it cannot run);
    /// launches whose operands TMA cannot load fall back to path 1. Unforced, path 2's tile is
    /// the 128 x 16 one for small batches on the devices measured for it
    /// ([`gemm_sm90::choose_tile16`]: in the skinny kernels' place), else the 64 x 96 one
    /// ([`gemm_sm90::choose_tile96`]), else the swapped 128 x 64 one for up to 64 rows, else
    /// the modelled tile; the skinny kernels are set up where they are the default and the
    /// 128 x 16 tile did not take their place.
    pub fn new(cx: &Context, cfg: GemmConfig) -> Result<Self> {
        let tile = cfg.resolve_tile(cx.info().sm_count);
        cfg.validate(tile)?;
        let name = tile.kernel_name(cfg.input);
        cx.set_max_dynamic_smem(name, tile.shape().smem_bytes())?;
        // Unforced: the library's rule; a forced tile runs unswapped, but for the 128 x 16 tile,
        // which exists for swapped products only.
        let swap = cfg.swap_ab.unwrap_or(match cfg.wg_tile {
            None => choose_swap_ab(cfg.m, cfg.n),
            Some(t) => t == WgTile::T128x16,
        });
        let path2 = match (cfg.tile, cfg.wg_tile) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidArgument(
                    "GeMM config forces both a path-1 tile and a path-2 tile; force one".into(),
                ))
            }
            (None, Some(t)) if swap => Some(Sm90Gemm::new_swapped(cx, &cfg, t)?),
            (None, Some(t)) => {
                gemm_sm90::check_unswapped_tile(t, cfg.m)?;
                Some(Sm90Gemm::new(cx, &cfg, t)?)
            }
            (None, None) if cfg.allow_path2 && gemm_sm90::device_supports(cx) => {
                if let Some(tile16) = gemm_sm90::choose_tile16(&cfg, cx.info()) {
                    Some(Sm90Gemm::new_swapped(cx, &tile16, WgTile::T128x16)?)
                } else if let Some(tile96) = gemm_sm90::choose_tile96(&cfg, cx.info().sm_count) {
                    Some(Sm90Gemm::new(cx, &tile96, WgTile::T64x96)?)
                } else if swap {
                    Some(Sm90Gemm::new_swapped(cx, &cfg, WgTile::T128x64)?)
                } else {
                    let t = choose_plain_wg_tile(cfg.m, cfg.n, cfg.k, cx.info().sm_count);
                    Some(Sm90Gemm::new(cx, &cfg, t)?)
                }
            }
            _ => None,
        };
        if cfg.swap_ab == Some(true) && path2.is_none() {
            return Err(Error::InvalidArgument(
                "GeMM swap-AB (C^T = B^T A^T) runs on path 2 only; this problem runs on path 1 \
                 (a path-1 tile forced, path 2 disallowed, or a device without sm_90a)"
                    .into(),
            ));
        }
        // The skinny kernels where they are the default, but for the devices whose small
        // batches run the 128 x 16 tile in their place (`gemm_sm90::choose_tile16`).
        let tile16 = path2.as_ref().is_some_and(|k| k.tile() == WgTile::T128x16);
        let skinny = match cfg.skinny {
            Some(true) => Some(SkinnyGemm::new(cx, &cfg)?),
            Some(false) => None,
            None if gemm_skinny::is_default_for(&cfg) && !tile16 => Some(SkinnyGemm::new(cx, &cfg)?),
            None => None,
        };
        Ok(Self {
            cfg,
            tile,
            function: cx.function(name)?,
            ordinal: cx.info().ordinal,
            path2,
            skinny,
        })
    }

    /// The skinny kernel, when this GeMM uses it for untraced launches whose operands fit.
    pub fn skinny(&self) -> Option<&SkinnyGemm> {
        self.skinny.as_ref()
    }

    /// Whether a launch with `p` runs the skinny kernel: set up, untraced, operands aligned.
    pub fn uses_skinny(&self, p: &GemmParams) -> bool {
        self.skinny.is_some() && p.trace == 0 && gemm_skinny::operands_fit(p)
    }

    /// The path-2 kernel, when this GeMM uses path 2 for operands TMA can load.
    pub fn path2(&self) -> Option<&Sm90Gemm> {
        self.path2.as_ref()
    }

    /// Which kernel a launch with `p` runs: path 2's when set up and the operands fit TMA.
    pub fn uses_path2(&self, p: &GemmParams) -> bool {
        self.path2.is_some() && gemm_sm90::operands_fit(p)
    }

    /// The problem.
    pub fn config(&self) -> &GemmConfig {
        &self.cfg
    }

    /// The path-1 tile configuration (used for every launch when path 2 is not set up).
    pub fn tile(&self) -> TileConfig {
        self.tile
    }

    /// The path-1 entry point.
    pub fn kernel_name(&self) -> &'static str {
        self.tile.kernel_name(self.cfg.input)
    }

    /// The entry point an untraced launch with aligned operands runs (the skinny kernel's, else
    /// path 2's when set up).
    pub fn preferred_kernel_name(&self) -> &'static str {
        if let Some(s) = &self.skinny {
            return s.kernel_name();
        }
        self.path2
            .as_ref()
            .map_or_else(|| self.kernel_name(), Sm90Gemm::kernel_name)
    }

    /// The entry point a launch with `p` runs ([`Gemm::uses_skinny`], [`Gemm::uses_path2`]).
    pub fn kernel_name_for(&self, p: &GemmParams) -> &'static str {
        if let Some(s) = self.skinny.as_ref().filter(|_| self.uses_skinny(p)) {
            return s.kernel_name();
        }
        match self.path2.as_ref().filter(|_| self.uses_path2(p)) {
            Some(k) => k.kernel_name(),
            None => self.kernel_name(),
        }
    }

    /// The output-tile grid of the kernel a launch with `p` runs: path 2's tiles when
    /// [`Gemm::uses_path2`] (split-K units are not tiles: one event per output tile; a swapped
    /// launch's are the tiles of `C^T`, [`Sm90Gemm::swapped`]), else path 1's. A traced launch writes the event of tile `(tm, tn)` at index
    /// [`Grid::linear`] = `tm * tiles_n + tn`.
    pub fn trace_grid(&self, p: &GemmParams) -> Grid {
        let (m, n) = (self.cfg.m as u32, self.cfg.n as u32);
        match self.path2.as_ref().filter(|_| self.uses_path2(p)) {
            Some(k) => {
                let (m, n) = if k.swapped() { (n, m) } else { (m, n) };
                let (tm, tn) = k.tile().shape().tiles(m, n);
                Grid::new(tm, tn, 1)
            }
            None => self.tile.shape().grid(m, n),
        }
    }

    /// Output tiles of the kernel a launch with `p` runs: the [`TraceEvent`]s a traced
    /// launch writes (its buffer holds at least this many, [`crate::stream::trace_buffer`]).
    pub fn trace_tiles(&self, p: &GemmParams) -> usize {
        self.trace_grid(p).count() as usize
    }

    /// The events of a [`Gemm::launch_traced`] with `p` (after the launch completed): one per
    /// tile of [`Gemm::trace_grid`], relabelled as stage `stage`, each checked written by the
    /// kernel ([`plain_trace_events`]). Downloads `trace` (synchronizes its stream).
    pub fn trace_events(&self, p: &GemmParams, trace: &DeviceBuffer<u8>, stage: u32) -> Result<Vec<TraceEvent>> {
        let events = crate::stream::download_trace(trace)?;
        plain_trace_events(events, self.trace_tiles(p), stage, self.kernel_name_for(p))
    }

    /// Grid, block and dynamic shared memory of a path-1 launch.
    pub fn launch_config(&self) -> LaunchConfig {
        let s = self.tile.shape();
        let g = s.grid(self.cfg.m as u32, self.cfg.n as u32);
        LaunchConfig {
            grid_dim: (g.x, g.y, 1),
            block_dim: (s.threads(), 1, 1),
            shared_mem_bytes: s.smem_bytes(),
        }
    }

    /// The kernel parameter for buffers at these device addresses (`bias` 0 when unused).
    pub fn params(&self, a: u64, b: u64, c: u64, bias: u64) -> GemmParams {
        let c_ = &self.cfg;
        GemmParams::dense(a, b, c, bias, c_.m as u32, c_.n as u32, c_.k as u32, c_.flags())
    }

    /// Checks the buffers of a launch against the problem ([`validate_buffers`]) and returns
    /// the kernel parameter.
    pub fn check<I: Element, O: Element>(
        &self,
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &DeviceBuffer<O>,
        bias: Option<&DeviceBuffer<f32>>,
    ) -> Result<GemmParams> {
        let bias_addr = validate_buffers(&self.cfg, self.ordinal, a, b, c, bias)?;
        Ok(self.params(a.addr(), b.addr(), c.addr(), bias_addr))
    }

    /// Checks the buffers ([`Gemm::check`]) and launches `C = epilogue(A B)` on `stream`.
    /// Asynchronous: synchronize the stream (or download C) to see the result.
    pub fn launch<I: Element, O: Element>(
        &self,
        stream: &Stream,
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &mut DeviceBuffer<O>,
        bias: Option<&DeviceBuffer<f32>>,
    ) -> Result<()> {
        self.launch_with_trace(stream, a, b, c, bias, None)
    }

    /// As [`Gemm::launch`], with the kernel writing one [`TraceEvent`] per output tile into
    /// `trace` (`stage` 0, index `tm * tiles_n + tn`; path 1: `t_dispatch = t_ready = t_start`
    /// when the block took the tile; path 2: `t_ready` when the block took the tile, `t_start`
    /// when its first stage landed, `t_dispatch = t_ready` but at block entry for a block's first
    /// tile (so `t_ready - t_dispatch` is the block's setup); `t_end` after its stores). `trace` must hold
    /// [`Gemm::trace_tiles`] events (allocate it with [`crate::stream::trace_buffer`]) on this
    /// GeMM's device; it is checked, with the other buffers, before anything is launched.
    /// Read the events back with [`Gemm::trace_events`].
    pub fn launch_traced<I: Element, O: Element>(
        &self,
        stream: &Stream,
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &mut DeviceBuffer<O>,
        bias: Option<&DeviceBuffer<f32>>,
        trace: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        self.launch_with_trace(stream, a, b, c, bias, Some(trace))
    }

    /// [`Gemm::launch`] (`trace` `None`) or [`Gemm::launch_traced`] (`Some`).
    pub fn launch_with_trace<I: Element, O: Element>(
        &self,
        stream: &Stream,
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &mut DeviceBuffer<O>,
        bias: Option<&DeviceBuffer<f32>>,
        trace: Option<&mut DeviceBuffer<u8>>,
    ) -> Result<()> {
        let mut p = self.check(a, b, c, bias)?;
        if let Some(t) = trace {
            let tiles = self.trace_tiles(&p);
            check_trace_buffer(
                tiles,
                t.len(),
                t.device(),
                t.addr(),
                self.ordinal,
                self.kernel_name_for(&p),
            )?;
            p.trace = t.addr();
        }
        // SAFETY: `check` verified types, lengths, devices and alignment of every buffer the
        // parameters point to, and `check_trace_buffer` the trace buffer against the tiles of
        // the kernel that runs; the borrows keep them alive until this call returns, and the
        // caller synchronizes before dropping them (as for every launch in cusync).
        unsafe { self.launch_params(stream, &p) }
    }

    /// Launches with a caller-built parameter (e.g. sub-buffers, other leading dimensions).
    /// Checks the stream's device and the shape fields against the problem.
    ///
    /// # Safety
    /// `p`'s addresses and leading dimensions must describe live device memory of the right
    /// types and sizes for this problem until the launch completes; `p.trace`, when not 0,
    /// one [`TraceEvent`] per tile of [`Gemm::trace_grid`] (8-byte aligned).
    pub unsafe fn launch_params(&self, stream: &Stream, p: &GemmParams) -> Result<()> {
        let c = &self.cfg;
        if stream.raw().context().ordinal() != self.ordinal {
            return Err(Error::InvalidArgument(format!(
                "GeMM stream is on device {}, but the GeMM was set up on device {}",
                stream.raw().context().ordinal(),
                self.ordinal
            )));
        }
        if (p.m as usize, p.n as usize, p.k as usize) != (c.m, c.n, c.k) {
            return Err(Error::InvalidArgument(format!(
                "GeMM parameters are for M={}, N={}, K={}, but the GeMM was set up for M={}, N={}, K={}",
                p.m, p.n, p.k, c.m, c.n, c.k
            )));
        }
        if p.c_trans() {
            return Err(Error::InvalidArgument(
                "GeMM parameters set C_TRANS, which only a swapped path-2 launch sets internally; \
                 store C row-major (GemmConfig::swap_ab runs the transposed product)"
                    .into(),
            ));
        }
        if let Some(s) = self.skinny.as_ref().filter(|_| self.uses_skinny(p)) {
            // SAFETY: forwarded contract; `uses_skinny` checked the operands' alignment.
            return unsafe { s.launch(stream, p) };
        }
        if let Some(k) = self.path2.as_ref().filter(|_| gemm_sm90::operands_fit(p)) {
            // SAFETY: forwarded contract; `operands_fit` holds.
            return unsafe { k.launch(stream, p) };
        }
        let arg = GemmParamsArg(*p);
        let mut b = stream.raw().launch_builder(&self.function);
        b.arg(&arg);
        // SAFETY: the entry point takes exactly one GemmParams by value; the launch config
        // matches the tile the kernel was compiled for; the caller vouches for the memory.
        unsafe { b.launch(self.launch_config()) }
            .map(|_| ())
            .map_err(Error::driver("launching a GeMM"))
    }
}
