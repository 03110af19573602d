//! GeMM path 2 on the host: the sm_90a kernels (TMA + `wgmma`, warp-specialized, persistent;
//! device/src/kernels/gemm/sm90.rs), their tile choice, the tensor maps they load through, and
//! when they apply (an H200/H100 running the sm_90a PTX, operands TMA can address).
//!
//! [`super::gemm::Gemm`] uses path 2 whenever it applies and no path-1 tile was forced, and
//! falls back to path 1 per launch for operands TMA cannot load (bases not 16-byte aligned, or
//! leading dimensions not multiples of 8 elements).

use super::gemm::{GemmConfig, InputType};
use crate::error::{Error, Result};
use crate::kernels::PTX_ARCH;
use crate::runtime::{Context, DeviceBuffer, ErrorSlotBuffer, Stream};
use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use cusync_shared::gemm::GemmParams;
use cusync_shared::gemm_sm90::{choose_split_k, ring_stages, TmaGemmParams, WG_RASTER_GROUP, WG_THREADS};
use cusync_shared::stream_k::{choose_stream_k, stream_k_plan, StreamKPlan};
use std::collections::HashMap;
use std::sync::Mutex;

mod choice;
mod maps;
mod tile;

pub use choice::*;
pub use maps::*;
pub use tile::WgTile;

/// Default bound on a path-2 pipeline wait (a wait that long means a kernel bug, not load).
pub const PIPELINE_TIMEOUT_NS: u64 = 2_000_000_000;

/// Tensor maps cached per kernel before the oldest are dropped (each is 256 bytes of device
/// memory; a cache miss costs one upload and a stream synchronization).
const MAP_CACHE_LIMIT: usize = 256;

/// Whether `cx` can run path 2: the embedded PTX is the sm_90a build and the device is sm_90.
pub fn device_supports(cx: &Context) -> bool {
    PTX_ARCH == "sm_90a" && (cx.info().major, cx.info().minor) == (9, 0)
}

/// Whether TMA can load the operands `p` describes: 16-byte aligned bases and leading
/// dimensions that are multiples of 8 elements (16 bytes), within the tensor-map limits.
pub fn operands_fit(p: &GemmParams) -> bool {
    let stride_ok = |ld: u32| ld.is_multiple_of(8) && ld > 0 && (ld as u64) * 2 < (1 << 40);
    p.a.is_multiple_of(16) && p.b.is_multiple_of(16) && stride_ok(p.lda) && stride_ok(p.ldb)
}

/// [`TmaGemmParams`] as a kernel argument (passed by value, 96 bytes).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct TmaGemmParamsArg(pub TmaGemmParams);

// SAFETY: TmaGemmParams is #[repr(C)] plain old data (Pod) with the layout the path-2 entry
// points take by value (asserted in shared/src/gemm_sm90.rs).
unsafe impl DeviceRepr for TmaGemmParamsArg {}

/// Split-K's and stream-K's device state.
#[derive(Debug)]
struct SplitState {
    /// Partial tiles of `partial_bytes`: `tiles * splits` with split-K, stream-K tiles times
    /// their slots with stream-K (only the device touches them).
    workspace: DeviceBuffer<u8>,
    /// One arrival counter per tile (zero between launches).
    counters: Mutex<DeviceBuffer<u32>>,
}

/// The cluster variant of a plain launch: its entry point and grid (a multiple of 2).
#[derive(Debug)]
struct ClusterKernel {
    name: &'static str,
    function: CudaFunction,
    grid: u32,
}

/// What identifies a set of tensor maps: the operands' addresses, shapes and layouts.
type MapKey = (u64, u64, u32, u32, u32, u32, u32, u32);

/// A path-2 kernel for one problem: its tile, entry point, error slot and tensor-map cache.
#[derive(Debug)]
pub struct Sm90Gemm {
    tile: WgTile,
    input: InputType,
    function: CudaFunction,
    grid: u32,
    /// Split-K factor (1: none).
    splits: u32,
    /// Stream-K plan (`None`: whole tiles or split-K).
    stream_k: Option<StreamKPlan>,
    /// Plain launches in clusters of two blocks multicasting B (`None`: single blocks).
    cluster: Option<ClusterKernel>,
    /// Split-K partial tiles and per-tile arrival counters (`None` without split-K). One
    /// launch at a time uses them: launches of one GeMM must not overlap.
    split_state: Option<SplitState>,
    errors: ErrorSlotBuffer,
    maps: Mutex<HashMap<MapKey, CudaSlice<u64>>>,
    /// Plain launches run `C^T = B^T A^T` ([`Sm90Gemm::new_swapped`]).
    swapped: bool,
    /// The tensor maps' L2 promotion ([`GemmConfig::l2_promotion`]).
    promotion: L2Promotion,
    /// Stages of the ring each launch uses ([`GemmConfig::pipeline_depth`]; 0: all).
    pipeline_depth: u32,
}

impl Sm90Gemm {
    /// As [`Sm90Gemm::new`] for the swapped product ([`GemmConfig::swapped`]): every plain
    /// launch of `cfg`'s parameters runs them through
    /// [`cusync_shared::gemm::GemmParams::swap_ab`] (C written transposed, so the result is
    /// `cfg`'s). Tiles, split-K and stream-K are those of the swapped shape.
    /// Only the 128 x 64 tile stores C transposed: another tile is an error.
    /// Unless split-K or stream-K is forced, the 128 x 16 tile takes its default launch's
    /// split ([`pinned_tile16_division`]) and other products of at most
    /// [`SWAP_STREAM_K_MAX_M`] rows take stream-K ([`swapped_stream_k`]).
    pub fn new_swapped(cx: &Context, cfg: &GemmConfig, tile: WgTile) -> Result<Self> {
        check_swapped_tile(tile, cfg.m)?;
        let cfg = &if tile == WgTile::T128x16 {
            pinned_tile16_division(cfg, cx.info().sm_count)
        } else {
            *cfg
        };
        let mut swapped = cfg.swapped();
        if swapped_stream_k(cfg) {
            swapped = swapped.stream_k(true);
        }
        let mut k = Self::new(cx, &swapped, tile)?;
        k.swapped = true;
        Ok(k)
    }

    /// The tensor maps' L2 promotion ([`GemmConfig::l2_promotion`]).
    pub fn promotion(&self) -> L2Promotion {
        self.promotion
    }

    /// Stages of the tile's ring each launch uses ([`GemmConfig::pipeline_depth`]): the tile's
    /// own count unless one was forced.
    pub fn pipeline_depth(&self) -> u32 {
        ring_stages(self.pipeline_depth, self.tile.shape().stages)
    }

    /// Whether plain launches run swapped ([`Sm90Gemm::new_swapped`]); their tiles (and trace
    /// events) are then those of `C^T`.
    pub fn swapped(&self) -> bool {
        self.swapped
    }

    /// Sets up path 2 for `cfg` on `cx` (which must [`device_supports`] it) with `tile`.
    pub fn new(cx: &Context, cfg: &GemmConfig, tile: WgTile) -> Result<Self> {
        if !device_supports(cx) {
            return Err(Error::UnsupportedArch {
                device: cx.info().name.clone(),
                major: cx.info().major,
                minor: cx.info().minor,
                ptx_arch: PTX_ARCH,
                hint: "GeMM path 2 (TMA + wgmma) needs an sm_90 device and the sm_90a build; \
                       leave the path-2 tile unset to fall back to path 1",
            });
        }
        let name = tile.kernel_name(cfg.input);
        let shape = tile.shape();
        if let Some(d) = cfg.pipeline_depth {
            check_pipeline_depth(tile, d)?;
        }
        let pipeline_depth = cfg
            .pipeline_depth
            .unwrap_or_else(|| default_pipeline_depth(cx.info(), cfg, &shape));
        cx.set_max_dynamic_smem(name, shape.smem_bytes())?;
        let (tm, tn) = shape.tiles(cfg.m as u32, cfg.n as u32);
        let tiles = tm * tn;
        let resident = cx.occupancy(name, WG_THREADS, shape.smem_bytes())?.max(1);
        let slots = cx.info().sm_count * resident;
        let k_steps = shape.k_steps(cfg.k as u32).max(1);
        // Stream-mode stages use the split-K factor (their tiles come from the stage's
        // order); plain launches use the stream-K plan when there is one.
        // Forced clusters run whole tiles: no split-K or stream-K unless also forced (then
        // refused below).
        let cluster_forced = cfg.cluster == Some(true);
        let splits = cfg
            .split_k
            .unwrap_or_else(|| {
                if cluster_forced {
                    1
                } else {
                    choose_split_k(tiles, k_steps, slots)
                }
            })
            .clamp(1, k_steps);
        let sk_blocks = stream_k_blocks(cfg, slots)?;
        let stream_k = match (cfg.stream_k, cfg.split_k) {
            (Some(true), _) => stream_k_plan(tiles, k_steps, sk_blocks),
            (None, None) if !cluster_forced => choose_stream_k(tm, tiles, k_steps, slots),
            _ => None,
        };
        let split_slots = if splits > 1 {
            tiles as usize * splits as usize
        } else {
            0
        };
        let sk_slots = stream_k.map_or(0, |k| (k.tiles - k.dp_tiles) as usize * k.slots_per_tile() as usize);
        let partial_slots = split_slots.max(sk_slots);
        let split_state = if partial_slots > 0 {
            Some(SplitState {
                workspace: cx.alloc_zeros::<u8>(partial_slots * shape.partial_bytes() as usize)?,
                counters: Mutex::new(cx.alloc_zeros::<u32>(tiles as usize)?),
            })
        } else {
            None
        };
        let grid = (tiles * splits).min(slots).max(1);
        let cluster = Self::cluster_kernel(cx, cfg, tile, (tm, tn), splits, stream_k.is_some())?;
        Ok(Self {
            tile,
            input: cfg.input,
            function: cx.function(name)?,
            grid,
            splits,
            stream_k,
            cluster,
            split_state,
            errors: ErrorSlotBuffer::new(cx)?,
            maps: Mutex::new(HashMap::new()),
            swapped: false,
            promotion: cfg.l2_promotion.unwrap_or(L2Promotion::B256),
            pipeline_depth,
        })
    }

    /// The cluster variant for `cfg` where it applies: forced (`cfg.cluster == Some(true)`, an
    /// error where it cannot run: the 128 x 128 tile, a transposed B, split-K or stream-K) or
    /// by default where the 128 x 256 tile has at least two row tiles, B is row-major and the
    /// launch runs whole tiles. Measured on the H200 (docs/perf-notes.md, session 4): 0.99x to
    /// 1.08x the speed of single blocks on every such shape of `gemm-table` (1.05x to 1.08x on
    /// the large ones).
    fn cluster_kernel(
        cx: &Context,
        cfg: &GemmConfig,
        tile: WgTile,
        (tm, tn): (u32, u32),
        splits: u32,
        stream_k: bool,
    ) -> Result<Option<ClusterKernel>> {
        let forced = cfg.cluster == Some(true);
        let Some(name) = cluster_choice(cfg, tile, tm, splits, stream_k)? else {
            return Ok(None);
        };
        let smem = tile.shape().smem_bytes();
        cx.set_max_dynamic_smem(name, smem)?;
        let resident = cx.max_active_clusters(name, 2, WG_THREADS, smem)?;
        if resident == 0 {
            return if forced {
                Err(Error::InvalidArgument(format!(
                    "GeMM path 2: no cluster of two `{name}` blocks fits this device"
                )))
            } else {
                Ok(None)
            };
        }
        let pairs = tm.div_ceil(2) * tn;
        Ok(Some(ClusterKernel {
            name,
            function: cx.function(name)?,
            grid: 2 * pairs.min(resident),
        }))
    }

    /// Whether plain launches run in clusters of two blocks that multicast B.
    pub fn clustered(&self) -> bool {
        self.cluster.is_some()
    }

    /// The tile in use.
    pub fn tile(&self) -> WgTile {
        self.tile
    }

    /// The entry point of plain launches.
    pub fn kernel_name(&self) -> &'static str {
        self.cluster
            .as_ref()
            .map_or_else(|| self.tile.kernel_name(self.input), |c| c.name)
    }

    /// Grid (persistent: at most the resident blocks; one per stream-K range with stream-K),
    /// block and shared memory of a plain launch.
    pub fn launch_config(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (
                match (&self.cluster, self.stream_k) {
                    (Some(c), _) => c.grid,
                    (None, Some(k)) => k.sk_units,
                    (None, None) => self.grid,
                },
                1,
                1,
            ),
            block_dim: (WG_THREADS, 1, 1),
            shared_mem_bytes: self.tile.shape().smem_bytes(),
        }
    }

    /// The error slot: a pipeline wait that timed out (a kernel bug) is reported here.
    pub fn errors(&self) -> &ErrorSlotBuffer {
        &self.errors
    }

    /// The device copy of `p`'s tensor maps (encoded and uploaded on first use).
    fn maps_for(&self, stream: &Stream, p: &GemmParams) -> Result<u64> {
        let key = (p.a, p.b, p.m, p.n, p.k, p.lda, p.ldb, p.flags);
        let mut cache = self
            .maps
            .lock()
            .map_err(|_| Error::InvalidArgument("tensor-map cache poisoned".into()))?;
        if let Some(buf) = cache.get(&key) {
            return Ok(device_addr(stream, buf));
        }
        if cache.len() >= MAP_CACHE_LIMIT {
            // Launches still in flight may read the maps being dropped.
            stream.synchronize()?;
            cache.clear();
        }
        let words = encode_maps_promoted(p, self.tile, self.input, self.promotion)?;
        let buf = stream
            .raw()
            .clone_htod(&words)
            .map_err(Error::driver("uploading tensor maps"))?;
        // Other streams may launch with these maps next: make the copy complete first.
        stream.synchronize()?;
        let addr = device_addr(stream, &buf);
        cache.insert(key, buf);
        Ok(addr)
    }

    /// Persistent blocks of a stream-mode stage launch (at most the resident blocks, at most
    /// the work units; stream-mode stages split K by [`Sm90Gemm::split_k`], never stream-K).
    pub fn persistent_blocks(&self) -> u32 {
        self.grid
    }

    /// The split-K factor (1: none): each output tile is computed by this many work units
    /// over consecutive K ranges, reduced in a fixed order (results are deterministic).
    /// Plain launches use it only without a stream-K plan ([`Sm90Gemm::stream_k`]).
    pub fn split_k(&self) -> u32 {
        self.splits
    }

    /// The stream-K plan (`None`: whole tiles or split-K): the leading tiles computed whole,
    /// then the rest's K-steps cut into one range per block, partial tiles summed in a fixed
    /// order (results are deterministic).
    pub fn stream_k(&self) -> Option<StreamKPlan> {
        self.stream_k
    }

    /// Zeroes the split-K (and stream-K) arrival counters: needed after a launch that stopped early (a
    /// timed-out wait), which leaves some counted; a completed launch leaves them zeroed.
    pub fn reset_split_state(&self) -> Result<()> {
        if let Some(state) = &self.split_state {
            let mut counters = state
                .counters
                .lock()
                .map_err(|_| Error::InvalidArgument("split-K counters poisoned".into()))?;
            counters.fill(0)?;
        }
        Ok(())
    }

    /// The kernel parameter for `p`: its tensor maps (encoded and uploaded on `stream` on first
    /// use), this kernel's error slot, and `timeout_ns` on every pipeline wait. Stream-mode
    /// stages pass the graph's semaphore timeout plus [`PIPELINE_TIMEOUT_NS`], since their
    /// consumer warpgroups wait on the pipeline while the producer waits on a dependency.
    pub fn params(&self, stream: &Stream, p: &GemmParams, timeout_ns: u64) -> Result<TmaGemmParams> {
        if !operands_fit(p) {
            return Err(Error::InvalidArgument(
                "GeMM path 2: TMA cannot load these operands (bases must be 16-byte aligned, leading \
                 dimensions multiples of 8 elements)"
                    .into(),
            ));
        }
        Ok(TmaGemmParams {
            gemm: *p,
            tensor_maps: self.maps_for(stream, p)?,
            error: self.errors.addr(),
            timeout_ns,
            raster_group: WG_RASTER_GROUP,
            split_k: self.splits,
            split_workspace: self.split_state.as_ref().map_or(0, |s| s.workspace.addr()),
            split_counters: self
                .split_state
                .as_ref()
                .map_or(0, |s| s.counters.lock().map_or(0, |c| c.addr())),
            sk_dp_tiles: self.stream_k.map_or(0, |k| k.dp_tiles),
            sk_units: self.stream_k.map_or(0, |k| k.sk_units),
            pipeline_depth: self.pipeline_depth,
            _pad: 0,
        })
    }

    /// The kernel parameter this GeMM's kernel runs `p` (the unswapped problem) with:
    /// [`Sm90Gemm::params`] of `p`, or of `p.swap_ab()` for a swapped kernel
    /// ([`Sm90Gemm::swapped`]). Plain launches and stream-mode stages both take it.
    pub fn launch_params(&self, stream: &Stream, p: &GemmParams, timeout_ns: u64) -> Result<TmaGemmParams> {
        self.params(stream, &if self.swapped { p.swap_ab() } else { *p }, timeout_ns)
    }

    /// Launches `p` on `stream`.
    ///
    /// # Safety
    /// `p` describes live device memory of the problem's types and sizes until the launch
    /// completes, and [`operands_fit`] holds for it.
    /// A swapped kernel ([`Sm90Gemm::swapped`]) launches `p.swap_ab()`.
    pub unsafe fn launch(&self, stream: &Stream, p: &GemmParams) -> Result<()> {
        let arg = TmaGemmParamsArg(self.launch_params(stream, p, PIPELINE_TIMEOUT_NS)?);
        let function = self.cluster.as_ref().map_or(&self.function, |c| &c.function);
        let mut b = stream.raw().launch_builder(function);
        b.arg(&arg);
        // SAFETY: the entry point takes one TmaGemmParams by value; the launch config gives it
        // its threads and shared memory; the caller vouches for the operands, and the maps
        // and error slot live as long as `self`.
        unsafe { b.launch(self.launch_config()) }
            .map(|_| ())
            .map_err(Error::driver("launching a path-2 GeMM"))
    }
}

/// The device address of `buf` (for a kernel parameter).
fn device_addr(stream: &Stream, buf: &CudaSlice<u64>) -> u64 {
    use cudarc::driver::DevicePtr;
    let (ptr, _sync) = buf.device_ptr(stream.raw());
    ptr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tma_needs_aligned_operands() {
        let p = GemmParams::dense(0x1000, 0x2000, 0x3000, 0, 100, 64, 40, 0);
        assert!(operands_fit(&p));
        let odd_k = GemmParams::dense(0x1000, 0x2000, 0x3000, 0, 100, 64, 41, 0);
        assert!(!operands_fit(&odd_k));
        let unaligned = GemmParams::dense(0x1008, 0x2000, 0x3000, 0, 100, 64, 40, 0);
        assert!(!operands_fit(&unaligned));
    }
}
