//! [`GemmChain`]: an N-layer bf16 GeMM chain `X[M,d0] x W0[d0,d1] x W1[d1,d2] ...` (the
//! paper's multi-layer GeMM, no activation) with layer `i` on logical device
//! `layer_devices[i]`, run two ways on the same buffers:
//!
//! * **StreamSync**: each layer's unsynchronized tensor-core GeMM on its device's stream, layer
//!   `i + 1` ordered after layer `i` by an event (the reference: same mainloop);
//! * **CTA-pipelining in stream mode** ([`MultiStreamGraph`]): every layer's stream-mode kernel
//!   launched at once, tiles synchronized by a policy, across devices at system scope.
//!
//! Memory follows the placement planner: the input on layer 0's device, each weight on its
//! layer's device, each layer's output on the device of the layer that reads it (the
//! producer writes straight into its consumer's memory).

use super::devices::DeviceSet;
use super::placement::{place, StageBinding};
use super::stream::{MultiStreamGraph, MultiStreamRun};
use crate::cudarc::driver::PushKernelArg;
use crate::error::{Error, Result};
use crate::mlp::stream_kernel;
use crate::ops::gemm::{Gemm, GemmConfig, GemmParamsArg, TileConfig};
use crate::runtime::{DeviceBuffer, Stream};
use crate::stream::{StageConfig, WaitKernelPolicy};
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

/// An N-layer GeMM chain over logical devices (see the module docs).
pub struct GemmChain<'d> {
    devices: &'d DeviceSet,
    m: usize,
    dims: Vec<usize>,
    layer_devices: Vec<usize>,
    tile: TileConfig,
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
    /// tile configuration for every layer (`tile`, or the heuristic's choice for layer 0, so
    /// RowSync's rows line up), uploads random inputs and weights (seeded by `seed`) and
    /// NaN-poisons the outputs.
    pub fn new(
        devices: &'d DeviceSet,
        m: usize,
        dims: &[usize],
        layer_devices: &[usize],
        tile: Option<TileConfig>,
        seed: u64,
    ) -> Result<Self> {
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
        let tile = tile.unwrap_or_else(|| GemmConfig::new(m, dims[1], dims[0]).resolve_tile(cx0.info().sm_count));
        let mut gemms = Vec::with_capacity(layers);
        let mut streams = Vec::with_capacity(layers);
        for (i, &d) in layer_devices.iter().enumerate() {
            let cx = devices.context(d)?;
            let cfg = GemmConfig::new(m, dims[i + 1], dims[i]).tile(tile);
            gemms.push(Gemm::new(cx, cfg)?);
            cx.set_max_dynamic_smem(stream_kernel(tile), tile.shape().smem_bytes())?;
            streams.push(cx.new_stream()?);
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let x = cx0.upload(&random_bf16(&mut rng, m * dims[0], 1.0))?;
        let mut weights = Vec::with_capacity(layers);
        let mut outputs = Vec::with_capacity(layers);
        let nan = bf16::from_f32(f32::NAN);
        for i in 0..layers {
            // |w| ~ 1/sqrt(fan-in) keeps every layer's activations O(1).
            let scale = 1.7 / (dims[i] as f32).sqrt();
            let w = random_bf16(&mut rng, dims[i] * dims[i + 1], scale);
            weights.push(devices.context(layer_devices[i])?.upload(&w)?);
            let out = devices.context(placement.output_device(i))?;
            outputs.push(out.upload(&vec![nan; m * dims[i + 1]])?);
        }
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
            tile,
            gemms,
            x,
            weights,
            outputs,
            streams,
        })
    }

    /// Number of layers.
    pub fn layers(&self) -> usize {
        self.dims.len() - 1
    }

    /// The tile configuration of every layer.
    pub fn tile(&self) -> TileConfig {
        self.tile
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
        self.tile.shape().grid(self.m as u32, self.dims[layer + 1] as u32)
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
        start.elapsed_ms(&end)
    }

    /// The stream-mode graph of this chain: layer `i` on its device, `policy` between
    /// consecutive layers, both walking tiles row by row.
    pub fn graph(&self, policy: PolicyKind, wait_kernel: WaitKernelPolicy) -> Result<MultiStreamGraph<'d>> {
        let s = self.tile.shape();
        let mut g = MultiStreamGraph::new(self.devices);
        let mut ids = Vec::with_capacity(self.layers());
        for (i, &d) in self.layer_devices.iter().enumerate() {
            ids.push(g.stage(
                StageConfig {
                    name: format!("layer{i}"),
                    grid: self.grid(i),
                    order: TileOrder::RowMajor,
                    custom_order: None,
                    kernel: stream_kernel(self.tile),
                    threads: s.threads(),
                    smem_bytes: s.smem_bytes(),
                },
                d,
            )?);
        }
        for w in ids.windows(2) {
            g.depend(w[0], w[1], Dependency::GemmRow, policy, s.bn)?;
        }
        g.set_wait_kernel(wait_kernel);
        Ok(g)
    }

    /// Launches `graph` (from [`GemmChain::graph`]) over this chain's buffers.
    pub fn run_graph(&mut self, graph: &mut MultiStreamGraph) -> Result<MultiStreamRun> {
        if graph.spec().stages().len() != self.layers() {
            return Err(Error::InvalidArgument(format!(
                "the graph has {} stage(s), the chain {} layer(s); build it with GemmChain::graph",
                graph.spec().stages().len(),
                self.layers()
            )));
        }
        let params: Vec<GemmParamsArg> = (0..self.layers()).map(|i| GemmParamsArg(self.params(i))).collect();
        let kernel = stream_kernel(self.tile);
        graph.run(|l| {
            let f = l.context.function(kernel)?;
            let p = &params[l.stage.0];
            let mut b = l.stream.raw().launch_builder(&f);
            b.arg(&l.desc).arg(p);
            // SAFETY: the entry point takes (StageDesc, GemmParams) by value; the parameters
            // point at buffers `self` owns (shapes fixed at construction), which outlive the
            // graph's synchronize at the end of `run`.
            unsafe { b.launch(l.config) }.map_err(Error::driver("launching a stream-mode GeMM"))?;
            Ok(())
        })
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
