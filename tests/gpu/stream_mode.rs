//! Stream mode on the GPU: every policy and order, grids several waves deep, consumers launched
//! before producers, repeated launches without clearing, results bitwise equal to StreamSync
//! (the same kernel code, one stream, no synchronization).

use cusync::cudarc::driver::{LaunchConfig, PushKernelArg};
use cusync::shared::order::TileOrder;
use cusync::shared::policy::{validate, Dependency, PolicyKind};
use cusync::shared::Grid;
use cusync::stream::{StageConfig, StreamGraph, WaitKernelPolicy};
use cusync::{Context, DeviceBuffer};
use cusync_tests::{ensure, fail, fresh_rng, random_f32, GpuTest};
use rand::seq::SliceRandom;

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "stream_mode::policies_and_orders_match_streamsync_bitwise",
        run: policies_and_orders,
    },
    GpuTest {
        name: "stream_mode::consumer_launched_first_with_wait_kernel",
        run: consumer_first,
    },
    GpuTest {
        name: "stream_mode::relaunch_without_clearing_and_trace",
        run: relaunch_and_trace,
    },
    GpuTest {
        name: "stream_mode::optimization_w_skips_the_wait_kernel_for_one_wave",
        run: optimization_w,
    },
];

const TILE: u32 = 32; // the scalar stage kernel's output tile and K step

/// X[M,K] -> C1 = X W1 [M,N1] -> C2 = C1 W2 [M,N2], f32.
struct Chain {
    m: u32,
    k: u32,
    n1: u32,
    n2: u32,
    x: DeviceBuffer<f32>,
    w1: DeviceBuffer<f32>,
    w2: DeviceBuffer<f32>,
    host: [Vec<f32>; 3],
}

impl Chain {
    fn new(cx: &Context, m: u32, k: u32, n1: u32, n2: u32, test: &str) -> Result<Self, String> {
        let mut rng = fresh_rng(test);
        let host = [
            random_f32(&mut rng, (m * k) as usize),
            random_f32(&mut rng, (k * n1) as usize),
            random_f32(&mut rng, (n1 * n2) as usize),
        ];
        Ok(Self {
            m,
            k,
            n1,
            n2,
            x: cx.upload(&host[0]).map_err(fail)?,
            w1: cx.upload(&host[1]).map_err(fail)?,
            w2: cx.upload(&host[2]).map_err(fail)?,
            host,
        })
    }

    fn poisoned(&self, cx: &Context) -> Result<(DeviceBuffer<f32>, DeviceBuffer<f32>), String> {
        Ok((
            cx.upload(&vec![f32::NAN; (self.m * self.n1) as usize]).map_err(fail)?,
            cx.upload(&vec![f32::NAN; (self.m * self.n2) as usize]).map_err(fail)?,
        ))
    }

    /// StreamSync: both unsynchronized kernels on one stream.
    fn stream_sync(&self, cx: &Context) -> Result<(Vec<f32>, Vec<f32>), String> {
        let (mut c1, mut c2) = self.poisoned(cx)?;
        let f = cx.function("scalar_gemm_nosync").map_err(fail)?;
        let s = cx.new_stream().map_err(fail)?;
        launch_nosync(&s, &f, &self.x, &self.w1, &mut c1, self.m, self.n1, self.k)?;
        launch_nosync(&s, &f, &c1, &self.w2, &mut c2, self.m, self.n2, self.n1)?;
        s.synchronize().map_err(fail)?;
        Ok((c1.download().map_err(fail)?, c2.download().map_err(fail)?))
    }

    /// A two-stage stream graph over the same data; returns the graph and output buffers.
    fn graph<'cx>(
        &self,
        cx: &'cx Context,
        orders: (TileOrder, TileOrder),
        custom: Option<(Vec<u32>, Vec<u32>)>,
        policy: PolicyKind,
    ) -> Result<(StreamGraph<'cx>, DeviceBuffer<f32>, DeviceBuffer<f32>), String> {
        let (c1, c2) = self.poisoned(cx)?;
        let g1 = Grid::covering(self.m, self.n1, TILE, TILE, 1);
        let g2 = Grid::covering(self.m, self.n2, TILE, TILE, 1);
        let mut g = StreamGraph::new(cx);
        let (o1, o2) = custom.map_or((None, None), |(a, b)| (Some(a), Some(b)));
        let stage = |name: &str, grid, order, custom_order| StageConfig {
            name: name.into(),
            grid,
            order,
            custom_order,
            kernel: "scalar_gemm_stream",
            threads: 256,
            smem_bytes: 0,
        };
        let p = g.stage(stage("producer", g1, orders.0, o1)).map_err(fail)?;
        let c = g.stage(stage("consumer", g2, orders.1, o2)).map_err(fail)?;
        g.depend(p, c, Dependency::GemmRow, policy, TILE).map_err(fail)?;
        Ok((g, c1, c2))
    }

    fn run_graph(
        &self,
        cx: &Context,
        g: &mut StreamGraph,
        c1: &mut DeviceBuffer<f32>,
        c2: &mut DeviceBuffer<f32>,
    ) -> Result<cusync::stream::StreamRun, String> {
        let f = cx.function("scalar_gemm_stream").map_err(fail)?;
        let (m, k, n1, n2) = (self.m, self.k, self.n1, self.n2);
        let (x, w1, w2) = (&self.x, &self.w1, &self.w2);
        g.run(|l| {
            let mut b = l.stream.raw().launch_builder(&f);
            b.arg(&l.desc);
            if l.stage.0 == 0 {
                b.arg(x.slice())
                    .arg(w1.slice())
                    .arg(c1.slice_mut())
                    .arg(&m)
                    .arg(&n1)
                    .arg(&k);
            } else {
                b.arg(c1.slice())
                    .arg(w2.slice())
                    .arg(c2.slice_mut())
                    .arg(&m)
                    .arg(&n2)
                    .arg(&n1);
            }
            // SAFETY: argument types and order match `scalar_gemm_stream`.
            unsafe { b.launch(l.config) }.map_err(cusync::Error::driver("launching scalar_gemm_stream"))?;
            Ok(())
        })
        .map_err(fail)
    }

    /// The f64 reference of a sample of C2's rows, against StreamSync's result (checks the
    /// kernel itself computes the chain).
    fn check_reference(&self, c2: &[f32]) -> Result<(), String> {
        let (m, k, n1, n2) = (self.m as usize, self.k as usize, self.n1 as usize, self.n2 as usize);
        let rows: Vec<usize> = (0..m).step_by((m / 16).max(1)).collect();
        let (mut out, mut reference) = (Vec::new(), Vec::new());
        for &r in &rows {
            let c1: Vec<f64> = (0..n1)
                .map(|j| {
                    (0..k)
                        .map(|kk| self.host[0][r * k + kk] as f64 * self.host[1][kk * n1 + j] as f64)
                        .sum()
                })
                .collect();
            for j in 0..n2 {
                reference.push((0..n1).map(|kk| c1[kk] * self.host[2][kk * n2 + j] as f64).sum::<f64>());
                out.push(c2[r * n2 + j] as f64);
            }
        }
        let err = cusync_tests::relative_error(&out, &reference);
        ensure(err < 1e-5, || {
            format!("StreamSync vs f64 reference: relative error {err:.3e}")
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn launch_nosync(
    s: &cusync::Stream,
    f: &cusync::cudarc::driver::CudaFunction,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &mut DeviceBuffer<f32>,
    m: u32,
    n: u32,
    k: u32,
) -> Result<(), String> {
    let grid = Grid::covering(m, n, TILE, TILE, 1);
    let mut lb = s.raw().launch_builder(f);
    lb.arg(a.slice())
        .arg(b.slice())
        .arg(c.slice_mut())
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
    Ok(())
}

fn bitwise_equal(what: &str, got: &[f32], want: &[f32]) -> Result<(), String> {
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

/// Every valid (policy, order) combination, 4096x128 -> 1024 -> 512: each stage 4096 or 2048
/// tiles, several waves of the H200.
fn policies_and_orders(cx: &Context) -> Result<(), String> {
    let chain = Chain::new(cx, 4096, 128, 1024, 512, "policies_and_orders")?;
    let (want1, want2) = chain.stream_sync(cx)?;
    chain.check_reference(&want2)?;
    let g1 = Grid::covering(chain.m, chain.n1, TILE, TILE, 1);
    let g2 = Grid::covering(chain.m, chain.n2, TILE, TILE, 1);
    let mut rng = fresh_rng("custom orders");
    let mut perm = |n: u32| {
        let mut v: Vec<u32> = (0..n).collect();
        v.shuffle(&mut rng);
        v
    };
    let policies = [
        PolicyKind::TileSync,
        PolicyKind::RowSync,
        PolicyKind::StridedSync { stride: 4 },
    ];
    let orders = [
        (TileOrder::RowMajor, TileOrder::RowMajor),
        (TileOrder::ColumnMajor, TileOrder::ColumnMajor),
        (TileOrder::StridedRowMajor { stride: 4 }, TileOrder::RowMajor),
    ];
    let mut ran = 0;
    for policy in policies {
        if validate(policy, Dependency::GemmRow, g1, g2).is_err() {
            println!(
                "    {} does not fit a GeMM row dependency: refused by validate (as it must be)",
                policy.name()
            );
            continue;
        }
        let mut cases: Vec<(TileOrder, TileOrder, Option<(Vec<u32>, Vec<u32>)>, &str)> =
            orders.iter().map(|&(a, b)| (a, b, None, "built-in")).collect();
        cases.push((
            TileOrder::RowMajor,
            TileOrder::RowMajor,
            Some((perm(g1.count()), perm(g2.count()))),
            "random",
        ));
        for (o1, o2, custom, label) in cases {
            let (mut g, mut c1, mut c2) = chain.graph(cx, (o1, o2), custom, policy)?;
            let run = chain.run_graph(cx, &mut g, &mut c1, &mut c2)?;
            let what = format!("{} {label} orders {o1:?}/{o2:?}", policy.name());
            bitwise_equal(&format!("{what}: C1"), &c1.download().map_err(fail)?, &want1)?;
            bitwise_equal(&format!("{what}: C2"), &c2.download().map_err(fail)?, &want2)?;
            println!(
                "    {what}: bitwise equal, {:.3} ms, wait kernel {:?}",
                run.elapsed_ms, run.wait_kernels
            );
            ran += 1;
        }
    }
    ensure(ran >= 8, || format!("only {ran} combinations ran"))
}

/// The consumer is launched before its producer; the wait kernel keeps its blocks off the SMs
/// until the producer's blocks are resident, so nothing deadlocks even when the consumer alone
/// would fill the GPU many times over.
fn consumer_first(cx: &Context) -> Result<(), String> {
    let chain = Chain::new(cx, 8192, 64, 512, 512, "consumer_first")?;
    let (want1, want2) = chain.stream_sync(cx)?;
    let (mut g, mut c1, mut c2) = chain.graph(
        cx,
        (TileOrder::RowMajor, TileOrder::RowMajor),
        None,
        PolicyKind::RowSync,
    )?;
    g.set_consumers_first(true);
    g.set_wait_kernel(WaitKernelPolicy::Always);
    let run = chain.run_graph(cx, &mut g, &mut c1, &mut c2)?;
    ensure(run.wait_kernels == vec![false, true], || {
        format!("wait kernels {:?}", run.wait_kernels)
    })?;
    bitwise_equal("C1", &c1.download().map_err(fail)?, &want1)?;
    bitwise_equal("C2", &c2.download().map_err(fail)?, &want2)?;
    println!("    consumer-first launch: {:.3} ms", run.elapsed_ms);
    Ok(())
}

/// Three launches on one graph without clearing anything, tracing on: every launch is right and
/// every tile of both stages leaves a trace event with ordered timestamps on a real SM.
fn relaunch_and_trace(cx: &Context) -> Result<(), String> {
    let chain = Chain::new(cx, 2048, 64, 512, 256, "relaunch_and_trace")?;
    let (want1, want2) = chain.stream_sync(cx)?;
    let (mut g, mut c1, mut c2) = chain.graph(
        cx,
        (TileOrder::RowMajor, TileOrder::RowMajor),
        None,
        PolicyKind::TileSync,
    )?;
    g.set_trace(true).map_err(fail)?;
    for epoch in 0..3u32 {
        c1.fill(f32::NAN).map_err(fail)?;
        c2.fill(f32::NAN).map_err(fail)?;
        let run = chain.run_graph(cx, &mut g, &mut c1, &mut c2)?;
        ensure(run.epoch == epoch, || format!("epoch {} expected {epoch}", run.epoch))?;
        bitwise_equal(&format!("epoch {epoch} C1"), &c1.download().map_err(fail)?, &want1)?;
        bitwise_equal(&format!("epoch {epoch} C2"), &c2.download().map_err(fail)?, &want2)?;
        for (stage, events) in run.traces.iter().enumerate() {
            let tiles = if stage == 0 { 64 * 16 } else { 64 * 8 };
            ensure(events.len() == tiles, || {
                format!("stage {stage}: {} events for {tiles} tiles", events.len())
            })?;
            for (i, e) in events.iter().enumerate() {
                let ok = e.stage == stage as u32
                    && e.tile == i as u32
                    && e.sm < cx.info().sm_count
                    && e.t_dispatch > 0
                    && e.t_dispatch <= e.t_ready
                    && e.t_ready <= e.t_end
                    && e.t_start <= e.t_end;
                ensure(ok, || {
                    format!("epoch {epoch} stage {stage} tile {i}: bad trace event {e:?}")
                })?;
            }
        }
    }
    let sems = g.semaphores(0).ok_or("no semaphores")?.download().map_err(fail)?;
    ensure(sems.iter().all(|&s| s == 3), || {
        format!("TileSync semaphores after 3 launches: {:?}", &sems[..4])
    })
}

/// Optimization W: small grids that fit in one wave together get no wait kernel; large ones do.
fn optimization_w(cx: &Context) -> Result<(), String> {
    let small = Chain::new(cx, 128, 64, 128, 128, "optimization_w")?; // 16 + 16 tiles
    let (mut g, mut c1, mut c2) = small.graph(
        cx,
        (TileOrder::RowMajor, TileOrder::RowMajor),
        None,
        PolicyKind::TileSync,
    )?;
    let run = small.run_graph(cx, &mut g, &mut c1, &mut c2)?;
    ensure(run.wait_kernels == vec![false, false], || {
        format!("small grids: wait kernels {:?}", run.wait_kernels)
    })?;
    let (want1, want2) = small.stream_sync(cx)?;
    bitwise_equal("small C1", &c1.download().map_err(fail)?, &want1)?;
    bitwise_equal("small C2", &c2.download().map_err(fail)?, &want2)?;
    let big = Chain::new(cx, 8192, 32, 512, 512, "optimization_w big")?; // 4096 + 4096 tiles
    let (mut g, mut c1, mut c2) = big.graph(
        cx,
        (TileOrder::RowMajor, TileOrder::RowMajor),
        None,
        PolicyKind::RowSync,
    )?;
    let run = big.run_graph(cx, &mut g, &mut c1, &mut c2)?;
    ensure(run.wait_kernels == vec![false, true], || {
        format!("large grids: wait kernels {:?}", run.wait_kernels)
    })
}
