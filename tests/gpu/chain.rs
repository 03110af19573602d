//! A chain of scalar f32 GeMM stages for protocol tests: X[M,K] -> C1 = X W1 -> C2 = C1 W2 ...
//! run either unsynchronized on one stream (StreamSync: the reference, the same kernel code) or
//! as a stream-mode graph with any policies and orders.

use cusync::cudarc::driver::{LaunchConfig, PushKernelArg};
use cusync::runtime::kernel_arg;
use cusync::shared::order::TileOrder;
use cusync::shared::policy::{Dependency, PolicyKind};
use cusync::shared::Grid;
use cusync::stream::{StageConfig, StreamGraph, StreamRun};
use cusync::{Context, DeviceBuffer};
use cusync_tests::{ensure, fail, random_f32};

/// The scalar stage kernel's output tile and K step.
pub const TILE: u32 = 32;

/// Layer widths `dims = [K, N1, N2, ...]`: layer i maps `dims[i]` columns to `dims[i + 1]`.
pub struct Chain {
    pub m: u32,
    pub dims: Vec<u32>,
    pub x: DeviceBuffer<f32>,
    pub weights: Vec<DeviceBuffer<f32>>,
    pub host_x: Vec<f32>,
    pub host_weights: Vec<Vec<f32>>,
}

/// How each stage of a graph is set up.
#[derive(Clone, Debug)]
pub struct StagePlan {
    pub order: TileOrder,
    pub custom_order: Option<Vec<u32>>,
}

impl Chain {
    pub fn new(cx: &Context, rng: &mut impl rand::Rng, m: u32, dims: &[u32]) -> Result<Self, String> {
        let host_x = random_f32(rng, (m * dims[0]) as usize);
        let host_weights: Vec<Vec<f32>> = dims
            .windows(2)
            .map(|w| random_f32(rng, (w[0] * w[1]) as usize))
            .collect();
        Ok(Self {
            m,
            dims: dims.to_vec(),
            x: cx.upload(&host_x).map_err(fail)?,
            weights: host_weights
                .iter()
                .map(|w| cx.upload(w))
                .collect::<Result<_, _>>()
                .map_err(fail)?,
            host_x,
            host_weights,
        })
    }

    pub fn layers(&self) -> usize {
        self.dims.len() - 1
    }

    pub fn grid(&self, layer: usize) -> Grid {
        Grid::covering(self.m, self.dims[layer + 1], TILE, TILE, 1)
    }

    /// NaN-poisoned outputs, one per layer.
    pub fn outputs(&self, cx: &Context) -> Result<Vec<DeviceBuffer<f32>>, String> {
        (0..self.layers())
            .map(|l| {
                cx.upload(&vec![f32::NAN; (self.m * self.dims[l + 1]) as usize])
                    .map_err(fail)
            })
            .collect()
    }

    /// StreamSync: every layer's unsynchronized kernel on one stream.
    pub fn stream_sync(&self, cx: &Context) -> Result<Vec<Vec<f32>>, String> {
        let mut outs = self.outputs(cx)?;
        let f = cx.function("scalar_gemm_nosync").map_err(fail)?;
        let s = cx.new_stream().map_err(fail)?;
        for l in 0..self.layers() {
            let (before, rest) = outs.split_at_mut(l);
            let a = if l == 0 { &self.x } else { &before[l - 1] };
            let (m, n, k) = (self.m, self.dims[l + 1], self.dims[l]);
            let grid = self.grid(l);
            let mut lb = s.raw().launch_builder(&f);
            lb.arg(a.slice())
                .arg(self.weights[l].slice())
                .arg(rest[0].slice_mut())
                .arg(&m)
                .arg(&n)
                .arg(&k);
            // SAFETY: argument types and order match `scalar_gemm_nosync`.
            unsafe {
                lb.launch(LaunchConfig {
                    grid_dim: (grid.x, grid.y, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                })
            }
            .map_err(fail)?;
        }
        s.synchronize().map_err(fail)?;
        outs.iter().map(|o| o.download().map_err(fail)).collect()
    }

    /// A stream-mode graph: one stage per layer, `policies[i]` between layer i and i + 1.
    pub fn graph<'cx>(
        &self,
        cx: &'cx Context,
        plans: &[StagePlan],
        policies: &[PolicyKind],
    ) -> Result<StreamGraph<'cx>, String> {
        let mut g = StreamGraph::new(cx);
        let mut ids = Vec::new();
        for (l, plan) in plans.iter().enumerate().take(self.layers()) {
            ids.push(
                g.stage(StageConfig {
                    name: format!("layer{l}"),
                    grid: self.grid(l),
                    order: plan.order,
                    custom_order: plan.custom_order.clone(),
                    kernel: "scalar_gemm_stream",
                    threads: 256,
                    smem_bytes: 0,
                    persistent_blocks: None,
                    ranges: false,
                    split_k: 1,
                })
                .map_err(fail)?,
            );
        }
        for (l, &policy) in policies.iter().enumerate() {
            g.depend(ids[l], ids[l + 1], Dependency::GemmRow, policy, TILE)
                .map_err(fail)?;
        }
        Ok(g)
    }

    /// Launches `g` over this chain's data into `outs`.
    pub fn run(&self, cx: &Context, g: &mut StreamGraph, outs: &mut [DeviceBuffer<f32>]) -> cusync::Result<StreamRun> {
        let f = cx.function("scalar_gemm_stream")?;
        g.run(|l| {
            let i = l.stage.0;
            let (before, rest) = outs.split_at_mut(i);
            let a = if i == 0 { &self.x } else { &before[i - 1] };
            let (m, n, k) = (self.m, self.dims[i + 1], self.dims[i]);
            let (a, w, c) = (a.addr(), self.weights[i].addr(), rest[0].addr());
            let mut args = [
                kernel_arg(&l.desc),
                kernel_arg(&a),
                kernel_arg(&w),
                kernel_arg(&c),
                kernel_arg(&m),
                kernel_arg(&n),
                kernel_arg(&k),
            ];
            // SAFETY: argument types and order match `scalar_gemm_stream` (device pointers as
            // u64 addresses of buffers that outlive the graph's run, which synchronizes).
            unsafe { l.launch(&f, &mut args) }
        })
    }

    /// The f64 reference of the last layer on a sample of rows, against `last`.
    pub fn check_reference(&self, last: &[f32]) -> Result<(), String> {
        let m = self.m as usize;
        let rows: Vec<usize> = (0..m).step_by((m / 8).max(1)).collect();
        let (mut out, mut reference) = (Vec::new(), Vec::new());
        for &r in &rows {
            let k0 = self.dims[0] as usize;
            let mut row: Vec<f64> = self.host_x[r * k0..(r + 1) * k0].iter().map(|&v| v as f64).collect();
            for (l, w) in self.host_weights.iter().enumerate() {
                let (k, n) = (self.dims[l] as usize, self.dims[l + 1] as usize);
                row = (0..n)
                    .map(|j| (0..k).map(|kk| row[kk] * w[kk * n + j] as f64).sum())
                    .collect();
            }
            let n = *self.dims.last().unwrap() as usize;
            reference.extend_from_slice(&row);
            out.extend(last[r * n..(r + 1) * n].iter().map(|&v| v as f64));
        }
        let err = cusync_tests::relative_error(&out, &reference);
        ensure(err < 1e-4, || {
            format!("StreamSync vs f64 reference: relative error {err:.3e}")
        })
    }
}

/// Bitwise comparison with a message naming the first differing element.
pub fn bitwise_equal(what: &str, got: &[f32], want: &[f32]) -> Result<(), String> {
    ensure(got.len() == want.len(), || {
        format!("{what}: length {} vs {}", got.len(), want.len())
    })?;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        ensure(g.to_bits() == w.to_bits(), || {
            format!("{what}: element {i} is {g}, StreamSync gave {w}")
        })?;
    }
    Ok(())
}

/// Every layer's output bitwise equal to StreamSync's.
pub fn all_equal(what: &str, outs: &[DeviceBuffer<f32>], want: &[Vec<f32>]) -> Result<(), String> {
    for (l, (o, w)) in outs.iter().zip(want).enumerate() {
        bitwise_equal(&format!("{what}: layer {l}"), &o.download().map_err(fail)?, w)?;
    }
    Ok(())
}
