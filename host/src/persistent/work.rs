//! [`StageWork`]: what a persistent stage's tiles compute (a device tile worker) and on which
//! buffers, checked when it is built.

use std::marker::PhantomData;

use cusync_shared::gemm::{GemmParams, TILE_128X128};
use cusync_shared::gemm_sm90::WG_THREADS;
use cusync_shared::persistent::{worker, BLOCK_THREADS};
use cusync_shared::Grid;

use crate::ops::gemm::{validate_buffers, GemmConfig, InputType, Layout, TileConfig};
use crate::ops::gemm_sm90::{operands_fit, WgTile};
use crate::runtime::Element;
use crate::{DeviceBuffer, Error, Result};

/// The device tile workers (`device/src/persistent/worker.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkerKind {
    /// f32 scalar GeMM, 32 x 32 tiles (the stream-mode tile body: bitwise equal to StreamSync).
    ScalarGemmF32,
    /// f32 `C = A + B`, 32 x 32 tiles (a stage with two producers).
    SumF32,
    /// Tensor-core GeMM (path 1), bf16 inputs, 128 x 128 x 32 tiles.
    GemmBf16x128,
    /// GeMM path 2 (sm_90a: TMA + `wgmma`, warp-specialized), bf16 inputs, row-major A and B,
    /// 128 x 256 x 64 tiles (the same per-tile computation as the plain path-2 kernel with
    /// that tile and no split-K).
    GemmSm90Bf16x256,
    /// GeMM path 2, bf16 inputs, row-major A and B, 128 x 128 x 64 tiles.
    GemmSm90Bf16x128,
}

/// A set of workers one megakernel entry point instantiates; every stage of a graph must be
/// of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// [`WorkerKind::ScalarGemmF32`] and [`WorkerKind::SumF32`]: `persistent_f32`.
    F32,
    /// [`WorkerKind::GemmBf16x128`]: `persistent_bf16_128x128`.
    Bf16x128,
    /// [`WorkerKind::GemmSm90Bf16x256`]: `persistent_sm90_bf16_128x256` (sm_90a builds only).
    Sm90Bf16x256,
    /// [`WorkerKind::GemmSm90Bf16x128`]: `persistent_sm90_bf16_128x128` (sm_90a builds only).
    Sm90Bf16x128,
}

/// Output tile of the f32 workers.
pub const F32_TILE: u32 = 32;

impl WorkerKind {
    /// The device's code for it (`cusync_shared::persistent::worker`).
    pub fn code(self) -> u32 {
        match self {
            WorkerKind::ScalarGemmF32 => worker::SCALAR_GEMM_F32,
            WorkerKind::SumF32 => worker::SUM_F32,
            WorkerKind::GemmBf16x128 => worker::GEMM_BF16_128X128,
            WorkerKind::GemmSm90Bf16x256 => worker::GEMM_SM90_BF16_128X256,
            WorkerKind::GemmSm90Bf16x128 => worker::GEMM_SM90_BF16_128X128,
        }
    }

    /// The path-2 worker of tile `tile`; an error for the 128 x 192, 128 x 96 and 128 x 64
    /// tiles, which only the plain (and, for 128 x 192 and 128 x 64, stream-mode) kernels
    /// instantiate.
    pub fn sm90(tile: WgTile) -> Result<Self> {
        match tile {
            WgTile::T128x256 => Ok(WorkerKind::GemmSm90Bf16x256),
            WgTile::T128x128 => Ok(WorkerKind::GemmSm90Bf16x128),
            WgTile::T128x192 | WgTile::T64x96 | WgTile::T128x64 | WgTile::T128x16 => {
                Err(Error::InvalidArgument(format!(
                    "the persistent megakernel has path-2 workers for the 128x256 and 128x128 tiles, not {}",
                    tile.name()
                )))
            }
        }
    }

    /// The path-2 tile of a path-2 worker (`None` for the others).
    pub fn wg_tile(self) -> Option<WgTile> {
        match self {
            WorkerKind::GemmSm90Bf16x256 => Some(WgTile::T128x256),
            WorkerKind::GemmSm90Bf16x128 => Some(WgTile::T128x128),
            _ => None,
        }
    }

    /// The entry-point family that has it.
    pub fn family(self) -> Family {
        match self {
            WorkerKind::ScalarGemmF32 | WorkerKind::SumF32 => Family::F32,
            WorkerKind::GemmBf16x128 => Family::Bf16x128,
            WorkerKind::GemmSm90Bf16x256 => Family::Sm90Bf16x256,
            WorkerKind::GemmSm90Bf16x128 => Family::Sm90Bf16x128,
        }
    }

    /// The tile grid over an `m x n` output (what the device worker computes it as).
    pub fn grid(self, m: u32, n: u32) -> Grid {
        match self {
            WorkerKind::ScalarGemmF32 | WorkerKind::SumF32 => Grid::covering(m, n, F32_TILE, F32_TILE, 1),
            WorkerKind::GemmBf16x128 => TILE_128X128.grid(m, n),
            WorkerKind::GemmSm90Bf16x256 | WorkerKind::GemmSm90Bf16x128 => {
                let (tm, tn) = self.wg_tile().map_or((0, 0), |t| t.shape().tiles(m, n));
                Grid::new(tm, tn, 1)
            }
        }
    }
}

impl Family {
    /// The megakernel entry point (CTA-pipelining protocol).
    pub fn kernel(self) -> &'static str {
        match self {
            Family::F32 => "persistent_f32",
            Family::Bf16x128 => "persistent_bf16_128x128",
            Family::Sm90Bf16x256 => "persistent_sm90_bf16_128x256",
            Family::Sm90Bf16x128 => "persistent_sm90_bf16_128x128",
        }
    }

    /// Its no-protocol twin (the overhead baseline).
    pub fn noprotocol_kernel(self) -> &'static str {
        match self {
            Family::F32 => "persistent_f32_noprotocol",
            Family::Bf16x128 => "persistent_bf16_128x128_noprotocol",
            Family::Sm90Bf16x256 => "persistent_sm90_bf16_128x256_noprotocol",
            Family::Sm90Bf16x128 => "persistent_sm90_bf16_128x128_noprotocol",
        }
    }

    /// Dynamic shared memory per block, in bytes.
    pub fn smem_bytes(self) -> u32 {
        match self {
            Family::F32 => 0,
            Family::Bf16x128 => TILE_128X128.smem_bytes(),
            Family::Sm90Bf16x256 | Family::Sm90Bf16x128 => self.wg_tile().map_or(0, |t| t.shape().smem_bytes()),
        }
    }

    /// Threads per block of its entry points (256; 384 for path 2).
    pub fn threads(self) -> u32 {
        match self {
            Family::F32 | Family::Bf16x128 => BLOCK_THREADS,
            Family::Sm90Bf16x256 | Family::Sm90Bf16x128 => WG_THREADS,
        }
    }

    /// The path-2 tile of a path-2 family (its stages carry `TmaGemmParams`), else `None`.
    pub fn wg_tile(self) -> Option<WgTile> {
        match self {
            Family::Sm90Bf16x256 => Some(WgTile::T128x256),
            Family::Sm90Bf16x128 => Some(WgTile::T128x128),
            Family::F32 | Family::Bf16x128 => None,
        }
    }
}

/// One stage's work: a tile worker and its operands (device addresses, checked against the
/// buffers they came from). It borrows the buffers for `'b`, so a graph built from it cannot
/// outlive them.
#[derive(Clone, Copy, Debug)]
pub struct StageWork<'b> {
    kind: WorkerKind,
    params: GemmParams,
    ordinal: usize,
    _buffers: PhantomData<&'b ()>,
}

fn need(what: &str, shape: &str, len: usize, needed: u64) -> Result<()> {
    if (len as u64) < needed {
        return Err(Error::InvalidArgument(format!(
            "persistent stage: {what} {shape} needs {needed} elements, the buffer holds {len}"
        )));
    }
    Ok(())
}

fn same_device(ordinals: &[usize]) -> Result<usize> {
    let first = ordinals[0];
    if let Some(other) = ordinals.iter().find(|&&o| o != first) {
        return Err(Error::InvalidArgument(format!(
            "persistent stage: operands on devices {first} and {other}; a stage's buffers must share a device"
        )));
    }
    Ok(first)
}

/// Dimensions of an f32 worker: at least 1, and every operand's element count (the device
/// indexes with 32-bit arithmetic) below 2^32.
fn check_f32_dims(what: &str, dims: &[(&str, u32)], products: &[(&str, u64)]) -> Result<()> {
    for &(name, v) in dims {
        if v == 0 {
            return Err(Error::InvalidArgument(format!("{what}: dimension {name} is 0")));
        }
    }
    for &(name, v) in products {
        if v > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "{what}: {name} = {v} elements does not fit the device's 32-bit indexing"
            )));
        }
    }
    Ok(())
}

impl<'b> StageWork<'b> {
    /// `C[m,n] = A[m,k] B[k,n]` with the f32 scalar tile (row-major, dense).
    pub fn scalar_gemm(
        a: &'b DeviceBuffer<f32>,
        b: &'b DeviceBuffer<f32>,
        c: &'b DeviceBuffer<f32>,
        m: u32,
        n: u32,
        k: u32,
    ) -> Result<Self> {
        let (mm, nn, kk) = (m as u64, n as u64, k as u64);
        check_f32_dims(
            "persistent scalar GeMM",
            &[("M", m), ("N", n), ("K", k)],
            &[("M*K", mm * kk), ("K*N", kk * nn), ("M*N", mm * nn)],
        )?;
        need("A", "[M, K]", a.len(), mm * kk)?;
        need("B", "[K, N]", b.len(), kk * nn)?;
        need("C", "[M, N]", c.len(), mm * nn)?;
        let ordinal = same_device(&[a.device(), b.device(), c.device()])?;
        Ok(Self {
            kind: WorkerKind::ScalarGemmF32,
            params: GemmParams::strided(a.addr(), b.addr(), c.addr(), 0, m, n, k, k, n, n, 0),
            ordinal,
            _buffers: PhantomData,
        })
    }

    /// `C[m,n] = A[m,n] + B[m,n]` (f32, row-major, dense).
    pub fn sum(
        a: &'b DeviceBuffer<f32>,
        b: &'b DeviceBuffer<f32>,
        c: &'b DeviceBuffer<f32>,
        m: u32,
        n: u32,
    ) -> Result<Self> {
        let elems = m as u64 * n as u64;
        check_f32_dims("persistent sum", &[("M", m), ("N", n)], &[("M*N", elems)])?;
        for (what, buf) in [("A", a), ("B", b), ("C", c)] {
            need(what, "[M, N]", buf.len(), elems)?;
        }
        let ordinal = same_device(&[a.device(), b.device(), c.device()])?;
        Ok(Self {
            kind: WorkerKind::SumF32,
            params: GemmParams::strided(a.addr(), b.addr(), c.addr(), 0, m, n, 1, n, n, n, 0),
            ordinal,
            _buffers: PhantomData,
        })
    }

    /// `C = epilogue(A B)` with the tensor-core tile (bf16 inputs, 128 x 128; `cfg`'s layouts,
    /// epilogue and output type; its tile must be unset or 128 x 128). The buffers are checked
    /// as for a single GeMM launch ([`validate_buffers`]).
    pub fn gemm_bf16<O: Element>(
        cfg: &GemmConfig,
        a: &'b DeviceBuffer<half::bf16>,
        b: &'b DeviceBuffer<half::bf16>,
        c: &'b DeviceBuffer<O>,
        bias: Option<&'b DeviceBuffer<f32>>,
    ) -> Result<Self> {
        if cfg.input != InputType::Bf16 {
            return Err(Error::InvalidArgument(format!(
                "persistent tensor-core stages take bf16 inputs, not {}",
                cfg.input.name()
            )));
        }
        if cfg.tile.is_some_and(|t| t != TileConfig::T128x128) {
            return Err(Error::InvalidArgument(format!(
                "persistent tensor-core stages use 128x128 tiles, not {:?}",
                cfg.tile
            )));
        }
        let (params, ordinal) = checked_params(cfg, a, b, c, bias)?;
        Ok(Self {
            kind: WorkerKind::GemmBf16x128,
            params,
            ordinal,
            _buffers: PhantomData,
        })
    }

    /// `C = epilogue(A B)` with the path-2 tile `tile` (sm_90a: TMA + `wgmma`; the
    /// `persistent_sm90_*` megakernels): bf16 inputs, row-major A and B (the megakernel
    /// instantiates that layout pair only), `cfg`'s epilogue and output type, no split-K
    /// (`cfg.split_k` unset or 1), `cfg.wg_tile` unset or `tile`, no path-1 tile forced, and
    /// operands TMA can load ([`operands_fit`]: 16-byte aligned bases, K and N multiples of 8).
    /// The buffers are checked as for a single GeMM launch ([`validate_buffers`]). Whether the
    /// device runs path 2 is checked when the graph is built.
    pub fn gemm_sm90_bf16<O: Element>(
        cfg: &GemmConfig,
        tile: WgTile,
        a: &'b DeviceBuffer<half::bf16>,
        b: &'b DeviceBuffer<half::bf16>,
        c: &'b DeviceBuffer<O>,
        bias: Option<&'b DeviceBuffer<f32>>,
    ) -> Result<Self> {
        let refuse = |why: String| Err(Error::InvalidArgument(format!("persistent path-2 stage: {why}")));
        if cfg.input != InputType::Bf16 {
            return refuse(format!("takes bf16 inputs, not {}", cfg.input.name()));
        }
        if (cfg.a_layout, cfg.b_layout) != (Layout::RowMajor, Layout::RowMajor) {
            return refuse(format!(
                "takes row-major A and B (the megakernel instantiates that layout pair only), not A {:?} and B {:?}",
                cfg.a_layout, cfg.b_layout
            ));
        }
        if let Some(t) = cfg.tile {
            return refuse(format!("the config forces the path-1 tile {}", t.name()));
        }
        if let Some(t) = cfg.wg_tile.filter(|&t| t != tile) {
            return refuse(format!(
                "the config forces the {} tile, the stage runs {}",
                t.name(),
                tile.name()
            ));
        }
        if let Some(s) = cfg.split_k.filter(|&s| s > 1) {
            return refuse(format!(
                "split-K is off in the megakernel, but the config forces {s} splits"
            ));
        }
        let (params, ordinal) = checked_params(cfg, a, b, c, bias)?;
        if !operands_fit(&params) {
            return refuse(format!(
                "TMA cannot load these operands ({}x{}x{}): bases must be 16-byte aligned and the leading \
                 dimensions K = {} and N = {} multiples of 8 elements",
                cfg.m, cfg.n, cfg.k, cfg.k, cfg.n
            ));
        }
        Ok(Self {
            kind: WorkerKind::sm90(tile)?,
            params,
            ordinal,
            _buffers: PhantomData,
        })
    }

    /// A stage from raw parameters (for memory this crate does not manage).
    ///
    /// # Safety
    /// `params` must describe device memory on device `ordinal` that the worker `kind` may read
    /// and write for its shapes, valid for as long as any graph built from it runs.
    pub unsafe fn from_raw(kind: WorkerKind, params: GemmParams, ordinal: usize) -> StageWork<'static> {
        StageWork {
            kind,
            params,
            ordinal,
            _buffers: PhantomData,
        }
    }

    /// The worker.
    pub fn kind(&self) -> WorkerKind {
        self.kind
    }

    /// The operands as the device reads them.
    pub fn params(&self) -> GemmParams {
        self.params
    }

    /// The device the operands live on.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The stage's tile grid.
    pub fn grid(&self) -> Grid {
        self.kind.grid(self.params.m, self.params.n)
    }
}

/// `cfg` validated (with the 128 x 128 path-1 shape, which bounds the grid the host plans) and
/// its buffers checked as for a single GeMM launch: the device parameters and the device.
fn checked_params<O: Element>(
    cfg: &GemmConfig,
    a: &DeviceBuffer<half::bf16>,
    b: &DeviceBuffer<half::bf16>,
    c: &DeviceBuffer<O>,
    bias: Option<&DeviceBuffer<f32>>,
) -> Result<(GemmParams, usize)> {
    cfg.validate(TileConfig::T128x128)?;
    let ordinal = a.device();
    let bias_addr = validate_buffers(cfg, ordinal, a, b, c, bias)?;
    let params = GemmParams::dense(
        a.addr(),
        b.addr(),
        c.addr(),
        bias_addr,
        cfg.m as u32,
        cfg.n as u32,
        cfg.k as u32,
        cfg.flags(),
    );
    Ok((params, ordinal))
}
