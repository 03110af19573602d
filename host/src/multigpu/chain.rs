//! [`GemmChain`]: an N-layer bf16 GeMM chain `X[M,d0] x W0[d0,d1] x W1[d1,d2] ...` (the
//! paper's multi-layer GeMM, no activation) with layer `i` on logical device
//! `layer_devices[i]`, run two ways on the same buffers:
//!
//! * **StreamSync**: each layer's unsynchronized tensor-core GeMM on its device's stream, layer
//!   `i + 1` ordered after layer `i` by an event (the reference: same mainloop);
//! * **CTA-pipelining in stream mode** ([`MultiStreamGraph`]): every layer's stream-mode kernel
//!   launched at once, tiles synchronized by a policy, across devices at system scope.
//!
//! Both use one kernel family and tile for every layer ([`MlpKernel`]): GeMM path 2 (sm_90a:
//! TMA + `wgmma`, warp-specialized, persistent blocks) where every device runs it and TMA can
//! load the operands, else path 1 (`cp.async` + `mma.sync`, one block per tile); either can be
//! forced. One tile for all layers keeps RowSync's rows lined up.
//!
//! Memory follows the placement planner: the input on layer 0's device, each weight on its
//! layer's device, each layer's output on the device of the layer that reads it (the
//! producer writes straight into its consumer's memory).

use super::devices::DeviceSet;
use super::placement::{place, Placement, StageBinding};
use super::stream::{MultiStageLaunch, MultiStreamGraph, MultiStreamRun};
use crate::cudarc::driver::PushKernelArg;
use crate::error::{Error, Result};
use crate::mlp::MlpKernel;
use crate::ops::gemm::{choose_tile, Gemm, GemmConfig, GemmParamsArg};
use crate::ops::gemm_sm90::{self, choose_wg_tile, Sm90Gemm, TmaGemmParamsArg, PIPELINE_TIMEOUT_NS};
use crate::runtime::{DeviceBuffer, Stream};
use crate::stream::{StageConfig, StageId, WaitKernelPolicy};
use crate::verify::chain_rows_error;
use cusync_shared::gemm::GemmParams;
use cusync_shared::order::TileOrder;
use cusync_shared::policy::{Dependency, PolicyKind};
use cusync_shared::Grid;
use half::bf16;
use rand::{Rng, SeedableRng};

/// Checks a chain's shape: at least one layer, every size at least 1, one device per layer.
pub fn validate_chain(m: usize, dims: &[usize], layer_devices: &[usize]) -> Result<()> {
    if dims.len() < 2 {
        return Err(Error::InvalidArgument(format!(
            "a GeMM chain needs dims = [K, N1, ...] with at least two entries, got {dims:?}"
        )));
    }
    if m == 0 || dims.contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "GeMM chain sizes must be at least 1: M = {m}, dims = {dims:?}"
        )));
    }
    if layer_devices.len() != dims.len() - 1 {
        return Err(Error::InvalidArgument(format!(
            "{} layer(s) but {} device binding(s) {layer_devices:?}; give one device per layer",
            dims.len() - 1,
            layer_devices.len()
        )));
    }
    Ok(())
}

/// Checks operands handed to [`GemmChain::from_host`] against the chain's shape: `x` is
/// `[m, dims[0]]`, `weights[i]` is `[dims[i], dims[i + 1]]` (row-major), one weight per layer.
pub fn validate_chain_data(m: usize, dims: &[usize], x_len: usize, weight_lens: &[usize]) -> Result<()> {
    validate_chain(m, dims, &vec![0; dims.len().saturating_sub(1)])?;
    if x_len != m * dims[0] {
        return Err(Error::InvalidArgument(format!(
            "the chain's input has {x_len} elements, not M x K = {m} x {} = {}",
            dims[0],
            m * dims[0]
        )));
    }
    if weight_lens.len() != dims.len() - 1 {
        return Err(Error::InvalidArgument(format!(
            "{} weight(s) for {} layer(s) (dims = {dims:?})",
            weight_lens.len(),
            dims.len() - 1
        )));
    }
    for (i, (&len, w)) in weight_lens.iter().zip(dims.windows(2)).enumerate() {
        if len != w[0] * w[1] {
            return Err(Error::InvalidArgument(format!(
                "layer {i}'s weight has {len} elements, not K x N = {} x {} = {} (dims = {dims:?})",
                w[0],
                w[1],
                w[0] * w[1]
            )));
        }
    }
    Ok(())
}

/// Whether TMA (GeMM path 2) can load every layer's operands: each layer's leading dimensions
/// (its K and N, i.e. every entry of `dims`) a multiple of 8 elements. (The chain's buffers are
/// whole allocations, so their bases are aligned.)
pub fn tma_loadable(dims: &[usize]) -> bool {
    dims.iter().all(|d| d.is_multiple_of(8))
}

/// The kernel a chain runs when none is forced, as a pure function: path 2 when `path2` (every
/// device of the chain runs it) and [`tma_loadable`]`(dims)`, with [`choose_wg_tile`] on layer
/// 0's `m x dims[1]`; else path 1's heuristic tile ([`choose_tile`]) for the same output.
/// `sm_count` is layer 0's device's.
pub fn default_kernel(path2: bool, m: usize, dims: &[usize], sm_count: u32) -> MlpKernel {
    let n = dims.get(1).copied().unwrap_or(1);
    if path2 && tma_loadable(dims) {
        MlpKernel::Path2(choose_wg_tile(m, n, sm_count))
    } else {
        MlpKernel::Path1(choose_tile(m, n, sm_count))
    }
}

pub use crate::stream::persistent_blocks;

/// A chain never holds the skinny kernel (`GemmChain::plan` refuses it); the error its matches
/// return if one did.
fn skinny_refused() -> Error {
    Error::InvalidArgument("the multi-GPU chain has no skinny-kernel stage".into())
}

/// An N-layer GeMM chain over logical devices (see the module docs).
pub struct GemmChain<'d> {
    devices: &'d DeviceSet,
    m: usize,
    dims: Vec<usize>,
    layer_devices: Vec<usize>,
    kernel: MlpKernel,
    gemms: Vec<Gemm>,
    x: DeviceBuffer<bf16>,
    weights: Vec<DeviceBuffer<bf16>>,
    outputs: Vec<DeviceBuffer<bf16>>,
    streams: Vec<Stream>,
}

fn random_bf16(rng: &mut impl Rng, n: usize, scale: f32) -> Vec<bf16> {
    (0..n)
        .map(|_| bf16::from_f32(rng.random_range(-scale..scale)))
        .collect()
}

impl<'d> GemmChain<'d> {
    /// Plans the placement (refusing what cannot run before anything is allocated), picks one
    /// kernel and tile for every layer (`kernel`, or [`default_kernel`]: path 2 where every
    /// device of the chain runs it, tiles chosen for layer 0, so RowSync's rows line up),
    /// uploads random inputs and weights (seeded by `seed`) and NaN-poisons the outputs.
    ///
    /// A forced path-2 kernel on a device without it is an `UnsupportedArch` error, and on
    /// sizes TMA cannot load ([`tma_loadable`]) an `InvalidArgument` one.
    pub fn new(
        devices: &'d DeviceSet,
        m: usize,
        dims: &[usize],
        layer_devices: &[usize],
        kernel: Option<MlpKernel>,
        seed: u64,
    ) -> Result<Self> {
        // Refuse what cannot run before generating operands.
        Self::plan(devices, m, dims, layer_devices, kernel)?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let x = random_bf16(&mut rng, m * dims[0], 1.0);
        let weights: Vec<Vec<bf16>> = dims
            .windows(2)
            // |w| ~ 1/sqrt(fan-in) keeps every layer's activations O(1).
            .map(|w| random_bf16(&mut rng, w[0] * w[1], 1.7 / (w[0] as f32).sqrt()))
            .collect();
        Self::from_host(devices, m, dims, layer_devices, kernel, &x, &weights)
    }

    /// As [`GemmChain::new`] on given operands: `x` `[m, dims[0]]` and `weights[i]`
    /// `[dims[i], dims[i + 1]]`, row-major bf16 (checked by [`validate_chain_data`]). Layers may
    /// be of any `K x N`: the TP + CTA-pipelining groups run `[W, W/G]` then `[W/G, W]`.
    pub fn from_host(
        devices: &'d DeviceSet,
        m: usize,
        dims: &[usize],
        layer_devices: &[usize],
        kernel: Option<MlpKernel>,
        x: &[bf16],
        weights: &[Vec<bf16>],
    ) -> Result<Self> {
        let (placement, kernel) = Self::plan(devices, m, dims, layer_devices, kernel)?;
        let lens: Vec<usize> = weights.iter().map(Vec::len).collect();
        validate_chain_data(m, dims, x.len(), &lens)?;
        let layers = dims.len() - 1;
        let cx0 = devices.context(layer_devices[0])?;
        let mut gemms = Vec::with_capacity(layers);
        let mut streams = Vec::with_capacity(layers);
        for (i, &d) in layer_devices.iter().enumerate() {
            let cx = devices.context(d)?;
            let cfg = GemmConfig::new(m, dims[i + 1], dims[i]);
            let cfg = match kernel {
                MlpKernel::Path1(t) => cfg.tile(t),
                // StreamSync's plain launches run the stages' kernel, configured as the MLP's
                // stages are (`mlp::path2_stage_config`: whole tiles, single blocks, the
                // tile's whole ring); never swapped (`Self::plan` refuses swapped tiles).
                MlpKernel::Path2(t) => crate::mlp::path2_stage_config(cfg, t, false, None),
                MlpKernel::Skinny => return Err(skinny_refused()),
            };
            gemms.push(Gemm::new(cx, cfg)?);
            cx.set_max_dynamic_smem(kernel.stream_kernel(), kernel.smem_bytes())?;
            streams.push(cx.new_stream()?);
        }
        let x = cx0.upload(x)?;
        let mut weights_dev = Vec::with_capacity(layers);
        let mut outputs = Vec::with_capacity(layers);
        let nan = bf16::from_f32(f32::NAN);
        for (i, w) in weights.iter().enumerate() {
            weights_dev.push(devices.context(layer_devices[i])?.upload(w)?);
            let out = devices.context(placement.output_device(i))?;
            outputs.push(out.upload(&vec![nan; m * dims[i + 1]])?);
        }
        let weights = weights_dev;
        // Every operand a layer's kernel dereferences must be reachable from its GPU: refuse
        // here what would be an illegal address at the first synchronization.
        for (i, &d) in layer_devices.iter().enumerate() {
            let input = if i == 0 { &x } else { &outputs[i - 1] };
            devices.check_access(d, input.addr(), &format!("layer {i}'s input"))?;
            devices.check_access(d, weights[i].addr(), &format!("layer {i}'s weight"))?;
            devices.check_access(d, outputs[i].addr(), &format!("layer {i}'s output"))?;
        }
        Ok(Self {
            devices,
            m,
            dims: dims.to_vec(),
            layer_devices: layer_devices.to_vec(),
            kernel,
            gemms,
            x,
            weights,
            outputs,
            streams,
        })
    }

    /// The placement and the kernel of a chain, checked before anything is allocated:
    /// [`validate_chain`], the planner, the kernel ([`default_kernel`] unless forced) and
    /// whether TMA can load every size when it is path 2.
    fn plan(
        devices: &DeviceSet,
        m: usize,
        dims: &[usize],
        layer_devices: &[usize],
        kernel: Option<MlpKernel>,
    ) -> Result<(Placement, MlpKernel)> {
        validate_chain(m, dims, layer_devices)?;
        let layers = dims.len() - 1;
        let stages: Vec<StageBinding> = layer_devices
            .iter()
            .enumerate()
            .map(|(i, &device)| StageBinding {
                name: format!("layer{i}"),
                device,
            })
            .collect();
        let edges: Vec<(usize, usize)> = (1..layers).map(|i| (i - 1, i)).collect();
        let placement = place(devices.topology(), &stages, &edges)
            .map_err(|e| Error::InvalidArgument(format!("placement: {e}")))?;
        let cx0 = devices.context(layer_devices[0])?;
        let kernel = match kernel {
            Some(k) => k,
            None => {
                let mut path2 = true;
                for &d in layer_devices {
                    path2 &= gemm_sm90::device_supports(devices.context(d)?);
                }
                default_kernel(path2, m, dims, cx0.info().sm_count)
            }
        };
        if kernel.is_skinny() {
            return Err(Error::InvalidArgument(
                "the multi-GPU chain's stages are tiled GeMMs (path 1 or path 2); the skinny kernels' \
                 stages are the single-GPU MLP's only"
                    .into(),
            ));
        }
        if kernel.is_swapped() {
            return Err(Error::InvalidArgument(format!(
                "the multi-GPU chain's stages run C, not C^T: the swapped skinny tile ({}) is the \
                 single-GPU MLP's only; use wg128x128, wg128x192 or wg128x256",
                kernel.name()
            )));
        }
        if kernel.is_path2() && !tma_loadable(dims) {
            return Err(Error::InvalidArgument(format!(
                "GeMM path 2 ({}) loads operands with TMA: every size in dims = {dims:?} must be a multiple \
                 of 8 (leading dimensions); use a path-1 kernel",
                kernel.name()
            )));
        }
        Ok((placement, kernel))
    }

    /// Number of layers.
    pub fn layers(&self) -> usize {
        self.dims.len() - 1
    }

    /// The kernel family and tile of every layer (both in StreamSync and in the graph).
    pub fn kernel(&self) -> MlpKernel {
        self.kernel
    }

    /// Rows of the input.
    pub fn m(&self) -> usize {
        self.m
    }

    /// `[K, N1, N2, ...]`.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Floating-point operations of all layers.
    pub fn flops(&self) -> f64 {
        self.dims
            .windows(2)
            .map(|w| 2.0 * self.m as f64 * w[0] as f64 * w[1] as f64)
            .sum()
    }

    /// Layer `i`'s tile grid.
    pub fn grid(&self, layer: usize) -> Grid {
        self.kernel.grid(self.m as u32, self.dims[layer + 1] as u32)
    }

    /// Layer `i`'s path-2 kernel (an error when the chain runs path 1).
    fn path2(&self, layer: usize) -> Result<&Sm90Gemm> {
        self.gemms[layer]
            .path2()
            .ok_or_else(|| Error::InvalidArgument(format!("the chain's layer {layer} has no path-2 GeMM set up")))
    }

    /// Layer `i`'s kernel parameters on this chain's buffers.
    fn params(&self, layer: usize) -> GemmParams {
        let a = if layer == 0 {
            self.x.addr()
        } else {
            self.outputs[layer - 1].addr()
        };
        self.gemms[layer].params(a, self.weights[layer].addr(), self.outputs[layer].addr(), 0)
    }

    /// After a path-2 launch: reads every layer's GeMM error slot (where a pipeline timeout, a
    /// kernel bug, lands) and, when one reported an error or `failed` (the launch itself
    /// failed), zeroes every layer's split-K arrival counters, which a launch that stopped early
    /// leaves counted. The outer error is a failure to read or reset; the inner one the first
    /// slot's report.
    fn check_path2_slots(&self, failed: bool) -> Result<Result<()>> {
        let mut first = Ok(());
        for i in 0..self.layers() {
            let slot = self.path2(i)?.errors().check();
            if first.is_ok() {
                first = slot;
            }
        }
        if failed || first.is_err() {
            for i in 0..self.layers() {
                self.path2(i)?.reset_split_state()?;
            }
        }
        Ok(first)
    }

    /// NaN-poisons every layer's output (so a run that skips a tile cannot pass a check).
    pub fn poison(&mut self) -> Result<()> {
        let nan = bf16::from_f32(f32::NAN);
        self.outputs.iter_mut().try_for_each(|o| o.fill(nan))
    }

    /// StreamSync: each layer's unsynchronized GeMM on its device's stream, ordered by events;
    /// returns device milliseconds (events on layer 0's device).
    pub fn run_stream_sync(&mut self) -> Result<f32> {
        let cx0 = self.devices.context(self.layer_devices[0])?;
        let (start, end) = (cx0.new_event()?, cx0.new_event()?);
        self.streams[0].record(&start)?;
        for i in 0..self.layers() {
            if i > 0 {
                let done = self.devices.context(self.layer_devices[i - 1])?.new_event()?;
                self.streams[i - 1].record(&done)?;
                self.streams[i].wait(&done)?;
            }
            let p = self.params(i);
            // SAFETY: the chain allocated every operand for its layer's shape (x: m x d0,
            // weights: d_i x d_i+1, outputs: m x d_i+1, bf16) on the devices the placement
            // chose, which the layer's GPU can address (same GPU or peer access enabled); the
            // buffers live in `self`, and this call synchronizes before returning.
            unsafe { self.gemms[i].launch_params(&self.streams[i], &p)? };
        }
        let last = self.layers() - 1;
        if last > 0 {
            let done = self.devices.context(self.layer_devices[last])?.new_event()?;
            self.streams[last].record(&done)?;
            self.streams[0].wait(&done)?;
        }
        self.streams[0].record(&end)?;
        self.streams.iter().try_for_each(|s| s.synchronize())?;
        if self.kernel.is_path2() {
            self.check_path2_slots(false)??;
        }
        start.elapsed_ms(&end)
    }

    /// Layer `i`'s stage on logical device `device`: the chain's kernel; for path 2 persistent
    /// blocks (the resident blocks of `device`'s GPU, at most the tiles).
    fn stage_config(&self, layer: usize, device: usize) -> Result<StageConfig> {
        let k = self.kernel;
        let grid = self.grid(layer);
        let (persistent, split_k) = match k {
            MlpKernel::Path1(_) => (None, 1),
            MlpKernel::Skinny => return Err(skinny_refused()),
            MlpKernel::Path2(_) => {
                let cx = self.devices.context(device)?;
                let occupancy = cx.occupancy(k.stream_kernel(), k.threads(), k.smem_bytes())?;
                let split_k = self.path2(layer)?.split_k();
                let units = grid.count() * split_k;
                (Some(persistent_blocks(units, cx.info().sm_count, occupancy)), split_k)
            }
        };
        Ok(StageConfig {
            name: format!("layer{layer}"),
            grid,
            order: TileOrder::RowMajor,
            custom_order: None,
            kernel: k.stream_kernel(),
            threads: k.threads(),
            smem_bytes: k.smem_bytes(),
            persistent_blocks: persistent,
            ranges: false,
            split_k,
        })
    }

    /// The stream-mode graph of this chain: layer `i` on its device, `policy` between
    /// consecutive layers, both walking tiles row by row, every stage the chain's kernel.
    pub fn graph(&self, policy: PolicyKind, wait_kernel: WaitKernelPolicy) -> Result<MultiStreamGraph<'d>> {
        let mut g = MultiStreamGraph::new(self.devices);
        self.add_to_graph(&mut g, policy, "")?;
        g.set_wait_kernel(wait_kernel);
        Ok(g)
    }

    /// Adds this chain's stages (named `{prefix}layer{i}`, on the layers' devices) and `policy`
    /// edges between consecutive layers to `graph` (which must be over this chain's device
    /// set); returns the stage ids in layer order. Several chains in one graph launch together
    /// ([`ChainGraph`]).
    pub fn add_to_graph(
        &self,
        graph: &mut MultiStreamGraph<'d>,
        policy: PolicyKind,
        prefix: &str,
    ) -> Result<Vec<StageId>> {
        if !std::ptr::eq(graph.devices(), self.devices) {
            return Err(Error::InvalidArgument(
                "the graph is over another device set than the chain; build both on one DeviceSet".into(),
            ));
        }
        let mut ids = Vec::with_capacity(self.layers());
        for (i, &d) in self.layer_devices.iter().enumerate() {
            let mut cfg = self.stage_config(i, d)?;
            cfg.name = format!("{prefix}{}", cfg.name);
            ids.push(graph.stage(cfg, d)?);
        }
        let producer_tile_n = self.kernel.tile_dims().1;
        for w in ids.windows(2) {
            graph.depend(w[0], w[1], Dependency::GemmRow, policy, producer_tile_n)?;
        }
        Ok(ids)
    }

    /// Refuses a graph stage that does not run this chain's kernel.
    fn check_stage_kernel(&self, stage: &StageConfig) -> Result<()> {
        let kernel = self.kernel.stream_kernel();
        if stage.kernel != kernel {
            return Err(Error::InvalidArgument(format!(
                "stage `{}` runs `{}`, the chain `{kernel}`; build the graph with GemmChain::graph",
                stage.name, stage.kernel
            )));
        }
        Ok(())
    }

    /// Every layer's kernel arguments for one launch of a graph whose waits are bounded by
    /// `graph_timeout_ns`. For path 2 the tensor maps are uploaded (once, then cached) on the
    /// layer's stream, on the device whose kernel reads them, and pipeline waits get the
    /// graph's timeout plus [`PIPELINE_TIMEOUT_NS`] (consumer warpgroups wait on the pipeline
    /// while the producer thread waits on a dependency).
    fn launch_args(&self, graph_timeout_ns: u64) -> Result<Vec<LayerArgs>> {
        match self.kernel {
            MlpKernel::Skinny => Err(skinny_refused()),
            MlpKernel::Path1(_) => Ok((0..self.layers())
                .map(|i| LayerArgs::Path1(GemmParamsArg(self.params(i))))
                .collect()),
            MlpKernel::Path2(_) => {
                let timeout = graph_timeout_ns.saturating_add(PIPELINE_TIMEOUT_NS);
                (0..self.layers())
                    .map(|i| {
                        let p = self
                            .path2(i)?
                            .launch_params(&self.streams[i], &self.params(i), timeout)?;
                        Ok(LayerArgs::Path2(TmaGemmParamsArg(p)))
                    })
                    .collect()
            }
        }
    }

    /// Launches one stage of a graph: this chain's stream-mode kernel with `args` (from
    /// [`GemmChain::launch_args`]) and the stage's descriptor.
    fn launch_layer(&self, l: &MultiStageLaunch, args: &LayerArgs) -> Result<()> {
        let f = l.context.function(self.kernel.stream_kernel())?;
        let mut b = l.stream.raw().launch_builder(&f);
        b.arg(&l.desc);
        match args {
            LayerArgs::Path1(p) => {
                b.arg(p);
                // SAFETY: the entry point takes (StageDesc, GemmParams) by value; the
                // parameters point at buffers the chain owns (shapes fixed at construction),
                // which outlive the graph's synchronize at the end of its `run`.
                unsafe { b.launch(l.config) }.map_err(Error::driver("launching a stream-mode GeMM"))?;
            }
            LayerArgs::Path2(p) => {
                b.arg(p);
                // SAFETY: the entry point takes (StageDesc, TmaGemmParams) by value; the
                // parameters point at buffers the chain owns (shapes fixed at construction,
                // TMA-loadable: checked in `from_host` and by `params`), at the tensor maps,
                // error slot and split-K state the layer's `Sm90Gemm` keeps, all on or
                // reachable from the stage's device, and outliving the graph's synchronize at
                // the end of its `run`.
                unsafe { b.launch(l.config) }.map_err(Error::driver("launching a path-2 stream-mode GeMM"))?;
            }
        }
        Ok(())
    }

    /// Launches `graph` (from [`GemmChain::graph`]) over this chain's buffers. For path 2 the
    /// kernel parameters (tensor maps) are built before the launch, with the graph's semaphore
    /// timeout plus [`PIPELINE_TIMEOUT_NS`] on pipeline waits, and the GeMMs' error slots are
    /// checked after it.
    pub fn run_graph(&mut self, graph: &mut MultiStreamGraph) -> Result<MultiStreamRun> {
        let stages = graph.spec().stages();
        if stages.len() != self.layers() {
            return Err(Error::InvalidArgument(format!(
                "the graph has {} stage(s), the chain {} layer(s); build it with GemmChain::graph",
                stages.len(),
                self.layers()
            )));
        }
        stages.iter().try_for_each(|s| self.check_stage_kernel(s))?;
        let map: Vec<(usize, usize)> = (0..self.layers()).map(|i| (0, i)).collect();
        run_chains(&[&*self], &map, graph)
    }

    /// Layer `layer`'s output buffer (on the device of the layer that reads it; the last
    /// layer's on its own device), e.g. to all-reduce the chain's result.
    pub fn output(&self, layer: usize) -> Result<&DeviceBuffer<bf16>> {
        self.outputs.get(layer).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "layer {layer} asked for, but the chain has {} layer(s)",
                self.layers()
            ))
        })
    }

    /// The logical device layer `layer` runs on.
    pub fn layer_device(&self, layer: usize) -> Option<usize> {
        self.layer_devices.get(layer).copied()
    }

    /// Every layer's output, downloaded.
    pub fn outputs(&self) -> Result<Vec<Vec<bf16>>> {
        self.outputs.iter().map(|o| o.download()).collect()
    }

    /// Checks rows `rows` of every layer against an f64 reference computed from the device's
    /// input to that layer (so layers are checked separately); returns the worst relative
    /// error ‖out − ref‖ / ‖ref‖.
    pub fn check_rows(&self, rows: &[usize]) -> Result<f64> {
        if let Some(&r) = rows.iter().find(|&&r| r >= self.m) {
            return Err(Error::InvalidArgument(format!("row {r} past M = {}", self.m)));
        }
        let input = self.x.download()?;
        let weights: Vec<Vec<bf16>> = self.weights.iter().map(|w| w.download()).collect::<Result<_>>()?;
        let outputs = self.outputs()?;
        Ok(chain_rows_error(&input, &weights, &outputs, &self.dims, rows))
    }
}

/// One layer's kernel arguments for one launch (after the stage descriptor).
enum LayerArgs {
    Path1(GemmParamsArg),
    Path2(TmaGemmParamsArg),
}

/// Launches `graph`, whose stage `s` is layer `map[s].1` of `chains[map[s].0]`, and checks
/// every path-2 chain's GeMM error slots afterwards (a pipeline timeout, a kernel bug, lands
/// there; a launch that stopped early leaves split-K arrival counters counted, which the check
/// resets).
fn run_chains(chains: &[&GemmChain], map: &[(usize, usize)], graph: &mut MultiStreamGraph) -> Result<MultiStreamRun> {
    let timeout = graph.timeout_ns();
    let args = chains
        .iter()
        .map(|c| c.launch_args(timeout))
        .collect::<Result<Vec<_>>>()?;
    let run = graph.run(|l| {
        let (c, layer) = map[l.stage.0];
        chains[c].launch_layer(l, &args[c][layer])
    });
    let mut slots = Ok(());
    for c in chains.iter().filter(|c| c.kernel.is_path2()) {
        let s = c.check_path2_slots(run.is_err())?;
        if slots.is_ok() {
            slots = s;
        }
    }
    let run = run?;
    slots?;
    Ok(run)
}

/// Several independent [`GemmChain`]s over one [`DeviceSet`] in one stream-mode graph, so
/// that one launch runs them all at once (each chain's layers synchronized by the policy, the
/// chains unsynchronized with each other): the G pipelined groups of TP + CTA-pipelining
/// ([`super::tp_cta`]). The graph's time runs from the first launch until every chain's last
/// layer has finished.
pub struct ChainGraph<'d> {
    graph: MultiStreamGraph<'d>,
    /// Per stage, `(chain, layer)`.
    map: Vec<(usize, usize)>,
    /// Per chain, its kernel's entry point and layer count (checked at each launch).
    shapes: Vec<(&'static str, usize)>,
}

impl<'d> ChainGraph<'d> {
    /// Chain `c`'s stages are named `c{c}.layer{i}`; `policy` between consecutive layers of
    /// each chain. Refuses no chain and chains over different device sets.
    pub fn new(chains: &[&GemmChain<'d>], policy: PolicyKind, wait_kernel: WaitKernelPolicy) -> Result<Self> {
        let Some(first) = chains.first() else {
            return Err(Error::InvalidArgument("a chain graph needs at least one chain".into()));
        };
        let mut graph = MultiStreamGraph::new(first.devices);
        let mut map = Vec::new();
        for (c, chain) in chains.iter().enumerate() {
            let ids = chain.add_to_graph(&mut graph, policy, &format!("c{c}."))?;
            map.extend((0..ids.len()).map(|layer| (c, layer)));
        }
        graph.set_wait_kernel(wait_kernel);
        let shapes = chains.iter().map(|c| (c.kernel.stream_kernel(), c.layers())).collect();
        Ok(Self { graph, map, shapes })
    }

    /// The underlying graph (its spec, placement, timeout).
    pub fn graph(&self) -> &MultiStreamGraph<'d> {
        &self.graph
    }

    /// Launches every chain once (the chains this graph was built from, in the same order).
    pub fn run(&mut self, chains: &[&GemmChain<'d>]) -> Result<MultiStreamRun> {
        let now: Vec<(&'static str, usize)> = chains.iter().map(|c| (c.kernel.stream_kernel(), c.layers())).collect();
        if now != self.shapes {
            return Err(Error::InvalidArgument(format!(
                "the chain graph was built for chains (kernel, layers) {:?}, launched with {now:?}",
                self.shapes
            )));
        }
        run_chains(chains, &self.map, &mut self.graph)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::TileConfig;
    use crate::ops::gemm_sm90::WgTile;

    #[test]
    fn the_default_kernel_is_path_2_where_every_device_runs_it_and_tma_loads_the_operands() {
        // 16384 x 8192 on 132 SMs: 128 x 64 tiles of 128 x 256, more than one per SM.
        let big = [8192, 8192, 8192];
        assert_eq!(
            default_kernel(true, 16384, &big, 132),
            MlpKernel::Path2(WgTile::T128x256)
        );
        // Too few 128 x 256 tiles to fill the SMs: 128 x 128.
        assert_eq!(
            default_kernel(true, 1000, &[520, 776, 1032], 132),
            MlpKernel::Path2(WgTile::T128x128)
        );
        // A device without path 2: path 1's heuristic for layer 0's output.
        assert_eq!(
            default_kernel(false, 16384, &big, 132),
            MlpKernel::Path1(TileConfig::T256x128)
        );
        assert_eq!(
            default_kernel(false, 1000, &[520, 776, 1032], 132),
            MlpKernel::Path1(choose_tile(1000, 776, 132))
        );
        // A size TMA cannot load (leading dimension not a multiple of 8): path 1 even on sm_90a.
        assert_eq!(
            default_kernel(true, 1000, &[520, 777, 1032], 132),
            MlpKernel::Path1(choose_tile(1000, 777, 132))
        );
        assert_eq!(
            default_kernel(true, 64, &[100, 64], 132),
            MlpKernel::Path1(TileConfig::T64x64)
        );
        assert!(tma_loadable(&[8, 16, 1024]));
        assert!(!tma_loadable(&[8, 12]));
    }

    #[test]
    fn operands_from_the_host_must_match_every_layers_k_and_n() {
        // The TP + CTA-pipelining group: [M, W] x [W, W/G] x [W/G, W].
        let dims = [8192, 4096, 8192];
        assert!(validate_chain_data(16, &dims, 16 * 8192, &[8192 * 4096, 4096 * 8192]).is_ok());
        let e = validate_chain_data(16, &dims, 16 * 4096, &[8192 * 4096, 4096 * 8192])
            .unwrap_err()
            .to_string();
        assert!(e.contains("input has 65536 elements, not M x K = 16 x 8192"), "{e}");
        let e = validate_chain_data(16, &dims, 16 * 8192, &[8192 * 4096, 8192 * 8192])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("layer 1's weight") && e.contains("K x N = 4096 x 8192"),
            "{e}"
        );
        let e = validate_chain_data(16, &dims, 16 * 8192, &[8192 * 4096])
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 weight(s) for 2 layer(s)"), "{e}");
        assert!(validate_chain_data(0, &dims, 0, &[8192 * 4096, 4096 * 8192]).is_err());
        assert!(validate_chain_data(4, &[8], 32, &[]).is_err(), "no layer");
    }

    #[test]
    fn persistent_stages_launch_at_most_one_block_per_tile_and_per_resident_slot() {
        assert_eq!(persistent_blocks(32, 132, 1), 32);
        assert_eq!(persistent_blocks(512, 132, 1), 132);
        assert_eq!(persistent_blocks(512, 132, 2), 264);
        // An occupancy query of 0 still launches (the launch reports what does not fit).
        assert_eq!(persistent_blocks(512, 132, 0), 132);
        assert_eq!(persistent_blocks(1, 132, 1), 1);
    }
}
