//! Multi-GPU CTA-pipelining on one GPU: every multi-device code path with "devices" that are
//! virtual devices of one GPU (peer pointers are local ones, edges between them still post and
//! wait at system scope). What these tests cannot show, and what needs 2+ GPUs
//! (nvidia-h200-x2 or larger): NVLink peer writes, real peer access, NCCL with several ranks.
//!
//! * placement and device sets: virtual devices share one context, links are local, bad
//!   devices and ranks on one GPU are refused before launch;
//! * stream mode across devices (scalar f32 chain, every policy, several waves, wait kernels
//!   on and off, relaunches): bitwise equal to StreamSync, system scope on cross-device edges;
//! * the bf16 tensor-core GeMM chain across devices: bitwise equal to StreamSync and within
//!   bf16 rounding of an f64 reference, with path-1 kernels and (sm_90a; *skipped* elsewhere)
//!   path-2 persistent stream stages on partial tiles;
//! * micro-batching with cuBLAS (one GPU, and two virtual devices with event-ordered layers);
//! * NCCL all-reduce on one rank and tensor parallelism on one rank (reported *skipped* with the
//!   reason when libnccl cannot be loaded, never passed);
//! * the `cusync run multigpu` comparison at a small size, and its M sweep with 4 layers
//!   (tensor parallelism as 2 layer pairs on one rank);
//! * a tensor-parallel stack of 2 layer pairs on one rank (NCCL; *skipped* without it);
//! * TP + CTA-pipelining (`cusync run multigpu-tp`): 2 groups on 4 virtual devices, every
//!   group's `Y_g` against an f64 reference on fresh random inputs with poisoned outputs, and,
//!   since NCCL cannot put two ranks on one GPU, the host-side sum of the partials against the
//!   f64 `X A B` (the test says so); 1 group with a one-rank NCCL all-reduce; 2 groups on 4
//!   real GPUs with the NCCL all-reduce over 2 ranks (*skipped* with fewer than 4 GPUs).

use crate::chain::{all_equal, Chain, TILE};
use cusync::baselines::microbatch::{microbatch_chain_with, Microbatch, MicrobatchOptions};
use cusync::baselines::nccl::{nccl_present, nccl_unavailable_reason, nccl_version, NcclGroup};
use cusync::baselines::tensor_parallel::{TensorParallel, TpShape};
use cusync::cudarc::driver::PushKernelArg;
use cusync::mlp::MlpKernel;
use cusync::multigpu::chain::tma_loadable;
use cusync::multigpu::compare::{compare, render_sweep, sweep, sweep_csv, CompareOptions};
use cusync::multigpu::tp_cta::{self, host_sum, TpCta, TpCtaOptions};
use cusync::multigpu::{DeviceSet, GemmChain, Link, MultiStreamGraph};
use cusync::ops::gemm::TileConfig;
use cusync::ops::gemm_sm90::{self, WgTile};
use cusync::shared::order::TileOrder;
use cusync::shared::placement::Scope;
use cusync::shared::policy::{Dependency, PolicyKind};
use cusync::stream::{StageConfig, WaitKernelPolicy};
use cusync::verify::first_difference;
use cusync::{Context, DeviceBuffer, Error};
use cusync_tests::{ensure, fail, fresh_rng, random_f32, relative_error, skip, GpuTest};
use half::bf16;
use std::sync::Arc;

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "multigpu::traced_chain_across_virtual_devices_every_tile_once",
        run: traced_chain,
    },
    GpuTest {
        name: "multigpu::virtual_devices_share_a_context_and_bad_placements_are_refused",
        run: virtual_devices,
    },
    GpuTest {
        name: "multigpu::scalar_chain_across_virtual_devices_bitwise_equal_streamsync",
        run: scalar_chain,
    },
    GpuTest {
        name: "multigpu::bf16_gemm_chain_across_virtual_devices_sys_scope",
        run: bf16_chain,
    },
    GpuTest {
        name: "multigpu::bf16_gemm_chain_path2_across_virtual_devices_sys_scope",
        run: bf16_chain_path2,
    },
    GpuTest {
        name: "multigpu::microbatch_cublas_every_chunk_matches_reference",
        run: microbatch,
    },
    GpuTest {
        name: "multigpu::nccl_all_reduce_one_rank",
        run: nccl_one_rank,
    },
    GpuTest {
        name: "multigpu::tensor_parallel_one_rank_matches_reference",
        run: tensor_parallel_one_rank,
    },
    GpuTest {
        name: "multigpu::comparison_small_on_virtual_devices",
        run: comparison_small,
    },
    GpuTest {
        name: "multigpu::comparison_m_sweep_four_layers_on_virtual_devices",
        run: comparison_sweep_four_layers,
    },
    GpuTest {
        name: "multigpu::tensor_parallel_stack_two_pairs_one_rank_matches_reference",
        run: tensor_parallel_stack_one_rank,
    },
    GpuTest {
        name: "multigpu::tp_cta_two_groups_on_virtual_devices_partials_and_host_sum_match_f64",
        run: tp_cta_two_groups_virtual,
    },
    GpuTest {
        name: "multigpu::tp_cta_one_group_nccl_one_rank_all_reduce",
        run: tp_cta_one_group_one_rank,
    },
    GpuTest {
        name: "multigpu::tp_cta_sweep_small_on_virtual_devices_marks_what_nccl_cannot_run",
        run: tp_cta_sweep_virtual,
    },
    GpuTest {
        name: "multigpu::tp_cta_two_groups_on_four_real_gpus_all_reduce_matches_f64",
        run: tp_cta_four_gpus,
    },
];

fn virtual_pair(cx: &Context) -> Result<DeviceSet, String> {
    DeviceSet::virtual_on(cx.info().ordinal, 2).map_err(fail)
}

fn virtual_devices(cx: &Context) -> Result<(), String> {
    let devices = virtual_pair(cx)?;
    ensure(devices.len() == 2 && devices.is_virtual(), || format!("{devices:?}"))?;
    ensure(devices.physical_contexts().len() == 1, || {
        "two virtual devices of one GPU must share one context".into()
    })?;
    let (a, b) = (
        devices.context_arc(0).map_err(fail)?,
        devices.context_arc(1).map_err(fail)?,
    );
    ensure(Arc::ptr_eq(a, b), || "virtual devices opened two contexts".into())?;
    ensure(devices.link(0, 1).map_err(fail)? == Link::Local, || {
        "virtual devices must link locally".into()
    })?;
    print!("{}", devices.describe());

    let count = Context::device_count().map_err(fail)?;
    match DeviceSet::open(&[0, count]) {
        Err(Error::NoDevice(msg)) => ensure(msg.contains(&format!("device {count}")), || msg.clone())?,
        Err(e) => return Err(format!("device {count}: unexpected error {e}")),
        Ok(_) => return Err(format!("device {count} does not exist but was opened")),
    }

    let config = |name: &str| StageConfig {
        name: name.into(),
        grid: cusync::shared::Grid::new(4, 4, 1),
        order: TileOrder::RowMajor,
        custom_order: None,
        kernel: "scalar_gemm_stream",
        threads: 256,
        smem_bytes: 0,
        persistent_blocks: None,
        ranges: false,
        split_k: 1,
    };
    let mut g = MultiStreamGraph::new(&devices);
    let e = g.stage(config("far"), 5).unwrap_err().to_string();
    ensure(e.contains("bound to device 5"), || e.clone())?;
    let p = g.stage(config("p"), 0).map_err(fail)?;
    let c = g.stage(config("c"), 1).map_err(fail)?;
    g.depend(p, c, Dependency::GemmRow, PolicyKind::TileSync, TILE)
        .map_err(fail)?;
    let e = g
        .depend(c, p, Dependency::GemmRow, PolicyKind::TileSync, TILE)
        .unwrap_err()
        .to_string();
    ensure(e.contains("cycle") || e.contains("already"), || e.clone())?;
    ensure(g.output_device(p).map_err(fail)? == 1, || {
        "the producer's output must live on the consumer's device".into()
    })?;
    let plan = g.plan().map_err(fail)?;
    ensure(plan.edges()[0].scope() == Scope::Sys, || plan.describe())?;

    let e = TensorParallel::new(&[cx, cx], TpShape { m: 8, k: 8, f: 8, n: 8 }, 1)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure(e.contains("one rank per GPU"), || {
        format!("two TP ranks on one GPU: {e}")
    })
}

/// Launches a scalar-chain graph placed on `devices` over `chain`'s buffers.
fn run_scalar(
    chain: &Chain,
    g: &mut MultiStreamGraph,
    outs: &mut [DeviceBuffer<f32>],
) -> cusync::Result<cusync::multigpu::MultiStreamRun> {
    g.run(|l| {
        let f = l.context.function("scalar_gemm_stream")?;
        let i = l.stage.0;
        let (before, rest) = outs.split_at_mut(i);
        let a = if i == 0 { &chain.x } else { &before[i - 1] };
        let (m, n, k) = (chain.m, chain.dims[i + 1], chain.dims[i]);
        let mut b = l.stream.raw().launch_builder(&f);
        b.arg(&l.desc)
            .arg(a.slice())
            .arg(chain.weights[i].slice())
            .arg(rest[0].slice_mut());
        b.arg(&m).arg(&n).arg(&k);
        // SAFETY: argument types and order match `scalar_gemm_stream`; the buffers outlive
        // the graph's synchronize.
        unsafe { b.launch(l.config) }.map_err(Error::driver("launching scalar_gemm_stream"))?;
        Ok(())
    })
}

fn scalar_graph<'d>(
    devices: &'d DeviceSet,
    chain: &Chain,
    placement: &[usize],
    policy: PolicyKind,
    wait: WaitKernelPolicy,
) -> Result<MultiStreamGraph<'d>, String> {
    let mut g = MultiStreamGraph::new(devices);
    let mut ids = Vec::new();
    for (l, &d) in placement.iter().enumerate() {
        ids.push(
            g.stage(
                StageConfig {
                    name: format!("layer{l}"),
                    grid: chain.grid(l),
                    order: TileOrder::RowMajor,
                    custom_order: None,
                    kernel: "scalar_gemm_stream",
                    threads: 256,
                    smem_bytes: 0,
                    persistent_blocks: None,
                    ranges: false,
                    split_k: 1,
                },
                d,
            )
            .map_err(fail)?,
        );
    }
    for w in ids.windows(2) {
        g.depend(w[0], w[1], Dependency::GemmRow, policy, TILE).map_err(fail)?;
    }
    g.set_wait_kernel(wait);
    Ok(g)
}

/// Scalar f32 chains (the protocol tests' stage kernel), several waves deep, across two
/// virtual devices: every policy, wait kernels on and off, two launches each without clearing;
/// bitwise equal to StreamSync; cross-device edges at system scope, same-device ones at GPU scope;
/// the programmatic launch refused before launch.
fn scalar_chain(cx: &Context) -> Result<(), String> {
    let devices = virtual_pair(cx)?;
    let dcx = devices.context(0).map_err(fail)?;
    let mut rng = fresh_rng("scalar_chain");
    let chain = Chain::new(dcx, &mut rng, 4096, &[128, 1024, 512])?;
    let want = chain.stream_sync(dcx)?;
    chain.check_reference(want.last().unwrap())?;
    for placement in [[0usize, 1], [0, 0], [1, 0]] {
        for policy in [PolicyKind::TileSync, PolicyKind::RowSync] {
            for wait in [WaitKernelPolicy::Auto, WaitKernelPolicy::Always] {
                let mut g = scalar_graph(&devices, &chain, &placement, policy, wait)?;
                for launch in 0..2 {
                    let mut outs = chain.outputs(dcx)?;
                    let run = run_scalar(&chain, &mut g, &mut outs).map_err(fail)?;
                    let what = format!("{placement:?} {} {wait:?} launch {launch}", policy.name());
                    all_equal(&what, &outs, &want)?;
                    let scope = if placement[0] == placement[1] {
                        Scope::Gpu
                    } else {
                        Scope::Sys
                    };
                    ensure(run.scopes == vec![scope], || format!("{what}: scopes {:?}", run.scopes))?;
                    if launch == 1 {
                        println!(
                            "    {what}: bitwise equal, {:.3} ms, {:?} scope, wait kernels {:?}",
                            run.elapsed_ms, run.scopes, run.wait_kernels
                        );
                    }
                }
            }
        }
    }
    // Three layers, one same-device edge (GPU scope) and one cross-device edge (system scope).
    let chain = Chain::new(dcx, &mut rng, 2048, &[64, 512, 256, 128])?;
    let want = chain.stream_sync(dcx)?;
    let mut g = scalar_graph(
        &devices,
        &chain,
        &[0, 0, 1],
        PolicyKind::RowSync,
        WaitKernelPolicy::Auto,
    )?;
    let mut outs = chain.outputs(dcx)?;
    let run = run_scalar(&chain, &mut g, &mut outs).map_err(fail)?;
    all_equal("3 layers [0, 0, 1]", &outs, &want)?;
    ensure(run.scopes == vec![Scope::Gpu, Scope::Sys], || {
        format!("3 layers: scopes {:?}", run.scopes)
    })?;
    // The programmatic launch orders kernels on one stream of one GPU: a multi-device graph
    // refuses it with a clear error before it launches anything (its outputs keep their NaN).
    let mut g = scalar_graph(
        &devices,
        &chain,
        &[0, 0, 1],
        PolicyKind::RowSync,
        WaitKernelPolicy::Programmatic,
    )?;
    let mut outs = chain.outputs(dcx)?;
    let e = run_scalar(&chain, &mut g, &mut outs)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure(
        e.contains("programmatic dependent launch orders kernels on one stream of one GPU"),
        || format!("a multi-device graph with the programmatic launch: {e:?}"),
    )?;
    for (layer, out) in outs.iter().enumerate() {
        let written = out.download().map_err(fail)?.iter().filter(|v| !v.is_nan()).count();
        ensure(written == 0, || {
            format!("the refused programmatic launch wrote {written} outputs of layer {layer}")
        })?;
    }
    println!("    the programmatic launch on a multi-device graph: refused before launch ({e})");
    Ok(())
}

/// The bf16 tensor-core chain across two virtual devices (system-scope edge) and on one
/// (GPU-scope control): StreamSync matches an f64 reference, the pipelined run is bitwise
/// equal to StreamSync for RowSync and TileSync, twice without clearing.
fn bf16_chain(cx: &Context) -> Result<(), String> {
    let devices = virtual_pair(cx)?;
    for (m, dims, tile) in [
        (
            1000usize,
            vec![512usize, 768, 640],
            Some(MlpKernel::Path1(TileConfig::T64x64)),
        ),
        (
            4096,
            vec![1024, 1024, 1024],
            Some(MlpKernel::Path1(TileConfig::T128x128)),
        ),
        (2048, vec![1024, 1024, 1024], None),
    ] {
        for placement in [[0usize, 1], [0, 0]] {
            let mut chain = GemmChain::new(&devices, m, &dims, &placement, tile, 3).map_err(fail)?;
            chain.poison().map_err(fail)?;
            chain.run_stream_sync().map_err(fail)?;
            let want = chain.outputs().map_err(fail)?;
            let err = chain.check_rows(&[0, m / 2, m - 1]).map_err(fail)?;
            ensure(err < 1e-2, || {
                format!("M={m} {dims:?}: StreamSync vs f64 reference {err:.3e}")
            })?;
            for policy in [PolicyKind::RowSync, PolicyKind::TileSync] {
                for wait in [WaitKernelPolicy::Auto, WaitKernelPolicy::Always] {
                    let mut g = chain.graph(policy, wait).map_err(fail)?;
                    for launch in 0..2 {
                        chain.poison().map_err(fail)?;
                        let run = chain.run_graph(&mut g).map_err(fail)?;
                        let what = format!(
                            "M={m} {dims:?} {} {placement:?} {} {wait:?} launch {launch}",
                            chain.kernel().name(),
                            policy.name()
                        );
                        for (l, (got, w)) in chain.outputs().map_err(fail)?.iter().zip(&want).enumerate() {
                            if let Some(i) = first_difference(got, w) {
                                return Err(format!("{what}: layer {l} element {i} differs from StreamSync"));
                            }
                        }
                        let sys = placement[0] != placement[1];
                        ensure(run.scopes == vec![if sys { Scope::Sys } else { Scope::Gpu }], || {
                            format!("{what}: scopes {:?}", run.scopes)
                        })?;
                        if launch == 1 {
                            println!(
                                "    {what}: bitwise equal, {:.1} us, wait kernels {:?}",
                                run.elapsed_ms * 1e3,
                                run.wait_kernels
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// GeMM path 2's persistent stream stages in the bf16 chain across two virtual devices
/// (system-scope edge) and on one (GPU-scope control), on shapes with partial tiles in M and N
/// (M = 1000, N = 776, 1032) and on one with more tiles than resident blocks (several tiles per
/// block): StreamSync (path 2's unsynchronized kernel) matches an f64 reference on sampled
/// rows (the last in a partial row tile), the pipelined runs are bitwise equal to it for
/// RowSync and TileSync, three launches without clearing. The automatic kernel is path 2 here,
/// and falls back to path 1 where TMA cannot load the operands.
fn bf16_chain_path2(cx: &Context) -> Result<(), String> {
    if !gemm_sm90::device_supports(cx) {
        return Err(skip("this device or build has no GeMM path 2 (sm_90a)"));
    }
    let devices = virtual_pair(cx)?;
    let auto = GemmChain::new(&devices, 1000, &[520, 776, 1032], &[0, 1], None, 1).map_err(fail)?;
    ensure(auto.kernel().is_path2(), || {
        format!("automatic kernel on an sm_90a device: {}", auto.kernel().name())
    })?;
    drop(auto);
    let odd = [520usize, 777, 1032];
    ensure(!tma_loadable(&odd), || "777 is not a multiple of 8".into())?;
    let fallback = GemmChain::new(&devices, 1000, &odd, &[0, 1], None, 1).map_err(fail)?;
    ensure(!fallback.kernel().is_path2(), || {
        format!(
            "dims {odd:?} cannot be loaded by TMA, yet {} was chosen",
            fallback.kernel().name()
        )
    })?;
    drop(fallback);
    let forced = GemmChain::new(
        &devices,
        1000,
        &odd,
        &[0, 1],
        Some(MlpKernel::Path2(WgTile::T128x128)),
        1,
    );
    ensure(matches!(forced, Err(Error::InvalidArgument(_))), || {
        "a forced path-2 kernel on dims TMA cannot load must be refused".into()
    })?;

    for (m, dims, tile) in [
        (1000usize, vec![520usize, 776, 1032], WgTile::T128x256),
        (1000, vec![520, 776, 1032], WgTile::T128x128),
        (4096, vec![1024, 2048, 1024], WgTile::T128x128),
    ] {
        let kernel = MlpKernel::Path2(tile);
        for placement in [[0usize, 1], [0, 0]] {
            let mut chain = GemmChain::new(&devices, m, &dims, &placement, Some(kernel), 5).map_err(fail)?;
            ensure(chain.kernel() == kernel, || {
                format!("{:?} != {kernel:?}", chain.kernel())
            })?;
            chain.poison().map_err(fail)?;
            chain.run_stream_sync().map_err(fail)?;
            let want = chain.outputs().map_err(fail)?;
            let rows = [0, 127, m / 2, m - 1];
            let err = chain.check_rows(&rows).map_err(fail)?;
            ensure(err < 1e-2, || {
                format!(
                    "M={m} {dims:?} {}: StreamSync vs f64 reference {err:.3e}",
                    kernel.name()
                )
            })?;
            for policy in [PolicyKind::RowSync, PolicyKind::TileSync] {
                for wait in [WaitKernelPolicy::Auto, WaitKernelPolicy::Always] {
                    let mut g = chain.graph(policy, wait).map_err(fail)?;
                    for (i, st) in g.spec().stages().iter().enumerate() {
                        let blocks = st.persistent_blocks.unwrap_or(0);
                        ensure(blocks >= 1 && blocks <= st.work_units(), || {
                            format!(
                                "layer {i}: {blocks} persistent blocks for {} work units",
                                st.work_units()
                            )
                        })?;
                    }
                    for launch in 0..3 {
                        chain.poison().map_err(fail)?;
                        let run = chain.run_graph(&mut g).map_err(fail)?;
                        let what = format!(
                            "M={m} {dims:?} {} {placement:?} {} {wait:?} launch {launch}",
                            kernel.name(),
                            policy.name()
                        );
                        for (l, (got, w)) in chain.outputs().map_err(fail)?.iter().zip(&want).enumerate() {
                            if let Some(i) = first_difference(got, w) {
                                return Err(format!("{what}: layer {l} element {i} differs from StreamSync"));
                            }
                        }
                        let sys = placement[0] != placement[1];
                        ensure(run.scopes == vec![if sys { Scope::Sys } else { Scope::Gpu }], || {
                            format!("{what}: scopes {:?}", run.scopes)
                        })?;
                        if launch == 2 {
                            println!(
                                "    {what}: bitwise equal, {:.1} us, wait kernels {:?}",
                                run.elapsed_ms * 1e3,
                                run.wait_kernels
                            );
                        }
                    }
                }
            }
            let err = chain.check_rows(&rows).map_err(fail)?;
            ensure(err < 1e-2, || {
                format!("M={m} {dims:?} {}: pipelined vs f64 reference {err:.3e}", kernel.name())
            })?;
        }
    }
    Ok(())
}

/// Micro-batching with cuBLAS: every chunk size (dividing M or not, down to 7 rows) gives
/// every layer within bf16 rounding of an f64 reference, graph capture works, and the best
/// chunk is the one with the smallest median. Then the two-virtual-device variant (each layer
/// on its own device's streams, a chunk's layers ordered by events).
fn microbatch(cx: &Context) -> Result<(), String> {
    let (m, dims) = (1000usize, [256usize, 384, 320]);
    let opts = MicrobatchOptions {
        streams: 3,
        warmup: 1,
        iters: 3,
        ..Default::default()
    };
    let chunks = [1000, 333, 128, 7];
    let r = microbatch_chain_with(cx, m, &dims, &chunks, &opts).map_err(fail)?;
    print!("{r}");
    ensure(r.per_chunk.len() == chunks.len(), || format!("{r:?}"))?;
    ensure(r.per_chunk.iter().all(|t| t.graph), || {
        format!("CUDA graph capture did not run: {:?}", r.notes)
    })?;
    ensure(r.per_chunk.iter().all(|t| t.error.is_some_and(|e| e < 1e-2)), || {
        format!("{r:?}")
    })?;
    let min = r.per_chunk.iter().map(|t| t.stats.median).fold(f64::INFINITY, f64::min);
    ensure(r.best_ms == min, || format!("best {} vs min {min}", r.best_ms))?;

    let devices = virtual_pair(cx)?;
    let mut mb = Microbatch::on_devices(&devices, &[0, 1], m, &dims, 2, 4).map_err(fail)?;
    for chunk in [1000, 250, 99] {
        mb.poison().map_err(fail)?;
        mb.run(chunk).map_err(fail)?;
        let err = mb.check_rows(&[0, chunk.min(m - 1), m - 1]).map_err(fail)?;
        ensure(err < 1e-2, || {
            format!("two virtual devices, chunk {chunk}: relative error {err:.3e}")
        })?;
    }
    let r = mb.sweep(&[500, 125], &opts).map_err(fail)?;
    print!("{r}");
    Ok(())
}

fn nccl_or_skip() -> Result<(), String> {
    if nccl_present() {
        Ok(())
    } else {
        Err(skip(nccl_unavailable_reason()))
    }
}

/// A one-rank NCCL communicator: the all-reduce (sum over one rank) returns its input exactly.
fn nccl_one_rank(cx: &Context) -> Result<(), String> {
    nccl_or_skip()?;
    let (major, minor, patch) = nccl_version().map_err(fail)?;
    println!("    NCCL {major}.{minor}.{patch}");
    let stream = cx.new_stream().map_err(fail)?;
    let group = NcclGroup::new(std::slice::from_ref(&stream)).map_err(fail)?;
    ensure(group.world_size() == 1, || format!("{group:?}"))?;
    let mut rng = fresh_rng("nccl_one_rank");
    let host: Vec<bf16> = random_f32(&mut rng, (1 << 20) + 3)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let send = cx.upload(&host).map_err(fail)?;
    let mut recv = cx.upload(&vec![bf16::from_f32(f32::NAN); host.len()]).map_err(fail)?;
    group.all_reduce_sum_bf16(&[&send], &mut [&mut recv]).map_err(fail)?;
    stream.synchronize().map_err(fail)?;
    let got = recv.download().map_err(fail)?;
    ensure(first_difference(&got, &host).is_none(), || {
        "one-rank all-reduce changed the data".into()
    })?;
    let short = cx.alloc_zeros::<bf16>(3).map_err(fail)?;
    let e = group
        .all_reduce_sum_bf16(&[&short], &mut [&mut recv])
        .unwrap_err()
        .to_string();
    ensure(e.contains("send 3"), || e.clone())
}

/// Megatron-style TP on one rank (column-parallel GeMM, row-parallel GeMM, NCCL all-reduce):
/// the output is within bf16 rounding of the f64 reference, and the time splits into GeMMs
/// and all-reduce.
fn tensor_parallel_one_rank(cx: &Context) -> Result<(), String> {
    nccl_or_skip()?;
    let shape = TpShape {
        m: 512,
        k: 768,
        f: 1024,
        n: 640,
    };
    let mut tp = TensorParallel::new(&[cx], shape, 11).map_err(fail)?;
    let t = tp.time(1, 3).map_err(fail)?;
    let err = tp.check_rows(&[0, 255, 511]).map_err(fail)?;
    println!(
        "    1 rank: {:.1} us total, GeMMs {:.1} us, all-reduce {:.1} us; f64 reference {err:.2e}",
        t.total.median * 1e3,
        t.compute.median * 1e3,
        t.all_reduce.median * 1e3
    );
    ensure(err < 2e-2, || format!("relative error {err:.3e}"))?;
    ensure(t.total.median > 0.0 && t.compute.median > 0.0, || format!("{t:?}"))
}

/// The `cusync run multigpu` comparison at a small size on two virtual devices.
fn comparison_small(cx: &Context) -> Result<(), String> {
    let devices = virtual_pair(cx)?;
    let opts = CompareOptions {
        m: 1024,
        width: 1024,
        layers: 2,
        iters: 2,
        chunks: vec![256, 1024],
        streams: 2,
        policy: PolicyKind::RowSync,
        kernel: None,
    };
    let report = compare(&devices, &opts).map_err(fail)?;
    print!("{report}");
    ensure(report.virtual_devices && report.sys_scope_edges == 1, || {
        format!("{report:?}")
    })?;
    ensure(report.microbatch.is_ok(), || format!("{:?}", report.microbatch))?;
    match &report.tensor_parallel {
        Ok(tp) => ensure(tp.ranks == 1, || format!("{tp:?}")),
        Err(e) if !nccl_present() => {
            println!("    (TP not run: {e})");
            Ok(())
        }
        Err(e) => Err(format!("tensor parallelism failed with NCCL present: {e}")),
    }
}

/// Tracing in multi-device stream mode: a scalar chain across two virtual devices with tracing
/// on returns, per stage, one event per tile (each tile once, on a real SM, dispatch before
/// ready and start, both before end, stage ids right), outputs still bitwise equal to
/// StreamSync, and the events make a trace the analysis accepts (every stage present, every
/// tile counted).
fn traced_chain(cx: &Context) -> Result<(), String> {
    use cusync::trace::{StageMeta, Trace, TraceMeta};
    let devices = virtual_pair(cx)?;
    let dcx = devices.context(0).map_err(fail)?;
    let mut rng = fresh_rng("traced_chain");
    let chain = Chain::new(dcx, &mut rng, 1024, &[64, 512, 256])?;
    let want = chain.stream_sync(dcx)?;
    let mut g = scalar_graph(&devices, &chain, &[0, 1], PolicyKind::RowSync, WaitKernelPolicy::Auto)?;
    g.set_trace(true).map_err(fail)?;
    let mut outs = chain.outputs(dcx)?;
    let run = run_scalar(&chain, &mut g, &mut outs).map_err(fail)?;
    all_equal("traced", &outs, &want)?;
    ensure(run.traces.len() == 2, || format!("{} trace lists", run.traces.len()))?;
    let sms = cx.info().sm_count;
    for (stage, events) in run.traces.iter().enumerate() {
        let tiles = chain.grid(stage).count();
        ensure(events.len() == tiles as usize, || {
            format!("stage {stage}: {} events for {tiles} tiles", events.len())
        })?;
        let mut seen = vec![false; tiles as usize];
        for (i, e) in events.iter().enumerate() {
            ensure(e.tile == i as u32 && e.stage == stage as u32, || {
                format!("stage {stage} slot {i}: event {e:?}")
            })?;
            ensure(!seen[i], || format!("stage {stage}: tile {i} twice"))?;
            seen[i] = true;
            ensure(e.sm < sms, || format!("stage {stage} tile {i}: SM {}", e.sm))?;
            // Stream mode stamps the start before the first wait, so start may precede ready.
            ensure(
                e.t_dispatch > 0
                    && e.t_dispatch <= e.t_ready
                    && e.t_ready <= e.t_end
                    && e.t_dispatch <= e.t_start
                    && e.t_start <= e.t_end,
                || format!("stage {stage} tile {i}: times out of order {e:?}"),
            )?;
        }
    }
    let meta = TraceMeta {
        label: "scalar chain across two virtual devices, RowSync".into(),
        device: cx.info().name.clone(),
        sm_count: Some(sms),
        stages: (0..2)
            .map(|i| StageMeta {
                id: i as u32,
                name: format!("layer{i}"),
                grid: Some(chain.grid(i)),
                blocks_per_sm: None,
            })
            .collect(),
    };
    let trace = Trace::new(meta, run.traces.into_iter().flatten().collect()).map_err(fail)?;
    let analysis = trace.analyze().map_err(fail)?;
    ensure(
        analysis.tiles == chain.grid(0).count() + chain.grid(1).count() && analysis.stages.len() == 2,
        || format!("analysis: {} tiles, {} stages", analysis.tiles, analysis.stages.len()),
    )?;
    println!(
        "    {} + {} tiles traced across two devices, bitwise equal; analysis: {} stages",
        chain.grid(0).count(),
        chain.grid(1).count(),
        analysis.stages.len()
    );
    Ok(())
}

/// The `cusync run multigpu` M sweep at small sizes with 4 layers on 4 virtual devices: every
/// M's chain verified inside `compare`, micro-batching run with the chunks that fit each M,
/// tensor parallelism as 2 layer pairs (2 all-reduces) on one rank when NCCL loads; the table
/// and the CSV have one row per M.
fn comparison_sweep_four_layers(cx: &Context) -> Result<(), String> {
    let devices = DeviceSet::virtual_on(cx.info().ordinal, 4).map_err(fail)?;
    let opts = CompareOptions {
        m: 0,
        width: 512,
        layers: 4,
        iters: 1,
        chunks: vec![128, 256, 4096],
        streams: 2,
        policy: PolicyKind::RowSync,
        kernel: None,
    };
    let ms = [256usize, 384];
    let mut seen = Vec::new();
    let rows = sweep(&devices, &opts, &ms, |r| seen.push(r.m)).map_err(fail)?;
    ensure(seen == ms, || format!("progress saw {seen:?}"))?;
    for row in &rows {
        let r = row.report.as_ref().map_err(|e| format!("M = {}: {e}", row.m))?;
        ensure(r.sys_scope_edges == 3 && r.options.m == row.m, || format!("{r:?}"))?;
        let mb = r
            .microbatch
            .as_ref()
            .map_err(|e| format!("M = {}: micro-batching {e}", row.m))?;
        let chunks: Vec<usize> = mb.per_chunk.iter().map(|c| c.chunk).collect();
        ensure(chunks == [128, 256], || format!("M = {}: chunks {chunks:?}", row.m))?;
        match &r.tensor_parallel {
            Ok(tp) => ensure(tp.ranks == 1 && tp.pairs == 2, || format!("{tp:?}"))?,
            Err(e) if !nccl_present() => println!("    (TP not run: {e})"),
            Err(e) => return Err(format!("tensor parallelism failed with NCCL present: {e}")),
        }
    }
    let table = render_sweep(&rows, &opts);
    print!("{table}");
    ensure(table.contains("4-layer [M,512]") && table.contains("VIRTUAL"), || {
        table.clone()
    })?;
    let csv = sweep_csv(&rows, &opts);
    ensure(csv.lines().count() == 3, || csv.clone())
}

/// A tensor-parallel stack of 2 layer pairs (4 layers, 2 all-reduces) on one rank: every
/// pair's output within bf16 rounding of its f64 reference, natural and phased timings split
/// into GeMMs and all-reduces; a stack whose N differs from K is refused.
fn tensor_parallel_stack_one_rank(cx: &Context) -> Result<(), String> {
    nccl_or_skip()?;
    let shape = TpShape {
        m: 256,
        k: 512,
        f: 768,
        n: 512,
    };
    let mut tp = TensorParallel::stack(&[cx], shape, 2, 13).map_err(fail)?;
    ensure(tp.pairs() == 2, || format!("{} pairs", tp.pairs()))?;
    let natural = tp.time(1, 2).map_err(fail)?;
    let phased = tp.time_phased(1, 2).map_err(fail)?;
    let err = tp.check_rows(&[0, 100, 255]).map_err(fail)?;
    println!(
        "    2 pairs, 1 rank: natural {:.1} us (GeMMs {:.1}, all-reduces {:.1}); phased {:.1} us; f64 reference {err:.2e}",
        natural.total.median * 1e3,
        natural.compute.median * 1e3,
        natural.all_reduce.median * 1e3,
        phased.total.median * 1e3
    );
    ensure(err < 2e-2, || format!("relative error {err:.3e}"))?;
    ensure(natural.pairs == 2 && phased.phased && !natural.phased, || {
        format!("{natural:?} {phased:?}")
    })?;
    let e = TensorParallel::stack(&[cx], TpShape { n: 640, ..shape }, 2, 1)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure(e.contains("N must equal K"), || format!("N != K stack: {e}"))
}

/// Random bf16 `X [m, w]` in [-1, 1) and `A`, `B` `[w, w]` scaled by 1.7 / sqrt(w).
fn random_mlp(rng: &mut impl rand::Rng, m: usize, w: usize) -> (Vec<bf16>, Vec<bf16>, Vec<bf16>) {
    let scale = 1.7 / (w as f32).sqrt();
    let to_bf16 = |v: Vec<f32>, s: f32| v.into_iter().map(|x| bf16::from_f32(x * s)).collect::<Vec<_>>();
    (
        to_bf16(random_f32(rng, m * w), 1.0),
        to_bf16(random_f32(rng, w * w), scale),
        to_bf16(random_f32(rng, w * w), scale),
    )
}

/// f64 `H = X A` (`[m, w]`, no rounding).
fn reference_h(x: &[bf16], a: &[bf16], m: usize, w: usize) -> Vec<f64> {
    let mut h = vec![0f64; m * w];
    for r in 0..m {
        for k in 0..w {
            let xv = x[r * w + k].to_f64();
            for (acc, av) in h[r * w..(r + 1) * w].iter_mut().zip(&a[k * w..(k + 1) * w]) {
                *acc += xv * av.to_f64();
            }
        }
    }
    h
}

/// f64 `H[:, cols] B[cols, :]` (`[m, w]`) for the columns `first..first + len`.
fn reference_y(h: &[f64], b: &[bf16], m: usize, w: usize, first: usize, len: usize) -> Vec<f64> {
    let mut y = vec![0f64; m * w];
    for r in 0..m {
        for k in first..first + len {
            let hv = h[r * w + k];
            for (acc, bv) in y[r * w..(r + 1) * w].iter_mut().zip(&b[k * w..(k + 1) * w]) {
                *acc += hv * bv.to_f64();
            }
        }
    }
    y
}

fn to_f64(v: &[bf16]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// TP + CTA-pipelining with 2 groups on 4 virtual devices of one GPU, on fresh random inputs:
/// after poisoning, every group's pipelined `Y_g = (X A_g) B_g` (every element) is within bf16
/// rounding of an f64 reference, twice without clearing, for path 2 (RowSync) and path 1
/// (TileSync). NCCL cannot put the two groups' all-reduce ranks on one GPU, so the test checks
/// that this is said and refused, and checks the host-side sum of the partials against the f64
/// `X A B` instead.
fn tp_cta_two_groups_virtual(cx: &Context) -> Result<(), String> {
    let (m, w, groups) = (256usize, 512usize, 2usize);
    let devices = DeviceSet::virtual_on(cx.info().ordinal, 2 * groups).map_err(fail)?;
    let mut rng = fresh_rng("tp_cta_two_groups_virtual");
    let (x, a, b) = random_mlp(&mut rng, m, w);
    let h = reference_h(&x, &a, m, w);
    let full = reference_y(&h, &b, m, w, 0, w);
    for (kernel, policy) in [
        (None, PolicyKind::RowSync),
        (Some(MlpKernel::Path1(TileConfig::T64x64)), PolicyKind::TileSync),
    ] {
        let opts = TpCtaOptions {
            width: w,
            groups,
            iters: 1,
            policy,
            kernel,
        };
        let mut tpc = TpCta::new(&devices, m, &opts, &x, &a, &b).map_err(fail)?;
        let dims: Vec<[usize; 3]> = tpc.plans().iter().map(|p| p.dims(w)).collect();
        ensure(dims == [[512, 256, 512]; 2], || format!("group dims {dims:?}"))?;
        let why = match tpc.all_reduce_ranks() {
            Err(why) => why.to_string(),
            Ok(n) => return Err(format!("an all-reduce over {n} ranks on one GPU was set up")),
        };
        ensure(why.contains("one rank per GPU"), || why.clone())?;
        let e = tpc.run_all_reduce().unwrap_err().to_string();
        ensure(e.contains("cannot run"), || e.clone())?;
        println!(
            "    G = 2 on one GPU ({}, {}): the NCCL all-reduce cannot run ({why}); checking each group's Y_g and the host-side sum",
            tpc.kernel().name(),
            policy.name()
        );
        for launch in 0..2 {
            tpc.poison().map_err(fail)?;
            let ms = tpc.run_compute().map_err(fail)?;
            let partials = tpc.partials().map_err(fail)?;
            for (p, got) in tpc.plans().iter().zip(&partials) {
                let want = reference_y(&h, &b, m, w, p.first, p.len);
                let err = relative_error(&to_f64(got), &want);
                ensure(err < 1e-2, || {
                    format!("launch {launch}: group {} Y_g vs f64: {err:.3e}", p.group)
                })?;
            }
            let sum = host_sum(&partials);
            let err = relative_error(&sum, &full);
            ensure(err < 2e-2, || {
                format!("launch {launch}: host-side sum vs f64 X A B: {err:.3e}")
            })?;
            if launch == 1 {
                println!("    every Y_g within 1e-2 of f64, the host-side sum within {err:.1e} of X A B; {ms:.3} ms");
            }
        }
        let err = tpc.check_groups(&[0, 127, 255]).map_err(fail)?;
        ensure(err < 1e-2, || {
            format!("H_g and Y_g vs f64 from the device's inputs: {err:.3e}")
        })?;
    }
    Ok(())
}

/// TP + CTA-pipelining with 1 group (2 virtual devices): the NCCL all-reduce over one rank runs
/// and returns the group's `Y` bit for bit, which is within bf16 rounding of f64 `X A B`.
fn tp_cta_one_group_one_rank(cx: &Context) -> Result<(), String> {
    nccl_or_skip()?;
    let (m, w) = (256usize, 512usize);
    let devices = virtual_pair(cx)?;
    let mut rng = fresh_rng("tp_cta_one_group_one_rank");
    let (x, a, b) = random_mlp(&mut rng, m, w);
    let opts = TpCtaOptions {
        width: w,
        groups: 1,
        iters: 1,
        policy: PolicyKind::RowSync,
        kernel: None,
    };
    let mut tpc = TpCta::new(&devices, m, &opts, &x, &a, &b).map_err(fail)?;
    ensure(tpc.all_reduce_ranks() == Ok(1), || {
        format!("{:?}", tpc.all_reduce_ranks())
    })?;
    tpc.poison().map_err(fail)?;
    let compute = tpc.run_compute().map_err(fail)?;
    let reduce = tpc.run_all_reduce().map_err(fail)?;
    let partial = tpc.partials().map_err(fail)?.remove(0);
    let reduced = tpc.reduced().map_err(fail)?;
    ensure(
        reduced.len() == 1 && first_difference(&reduced[0], &partial).is_none(),
        || "a one-rank all-reduce changed Y".into(),
    )?;
    let full = reference_y(&reference_h(&x, &a, m, w), &b, m, w, 0, w);
    let err = relative_error(&to_f64(&reduced[0]), &full);
    println!("    1 group: compute {compute:.3} ms, all-reduce {reduce:.3} ms; Y within {err:.1e} of f64");
    ensure(err < 1e-2, || format!("Y vs f64 X A B: {err:.3e}"))
}

/// `cusync run multigpu-tp` at small sizes on 4 virtual devices: every M verified and timed;
/// pure TP over 4 ranks and the all-reduce over 2 are reported as not run with the reason.
fn tp_cta_sweep_virtual(cx: &Context) -> Result<(), String> {
    let devices = DeviceSet::virtual_on(cx.info().ordinal, 4).map_err(fail)?;
    let opts = TpCtaOptions {
        width: 512,
        groups: 2,
        iters: 2,
        policy: PolicyKind::RowSync,
        kernel: None,
    };
    let rows = tp_cta::sweep(&devices, &[256, 384], &opts, |_| {}).map_err(fail)?;
    for r in &rows {
        let row = r.row.as_ref().map_err(|e| format!("M = {}: {e}", r.m))?;
        ensure(row.sum.all_reduce_vs_host_sum.is_none() && row.total.is_none(), || {
            format!("{row:?}")
        })?;
        let e = row.tp.as_ref().err().cloned().unwrap_or_default();
        ensure(e.contains("4 distinct GPUs"), || format!("pure TP: {e:?}"))?;
        ensure(
            row.all_reduce.as_ref().is_err_and(|e| e.contains("one rank per GPU")),
            || format!("{:?}", row.all_reduce),
        )?;
    }
    let text = tp_cta::render(&rows, &opts, &devices.describe(), devices.is_virtual());
    print!("{text}");
    ensure(text.contains("VIRTUAL") && text.contains("not run"), || text.clone())
}

/// TP + CTA-pipelining on 4 real GPUs (2 groups; *skipped* with fewer GPUs or without NCCL):
/// the NCCL all-reduce over the 2 consumer GPUs gives both ranks the same `Y`, within bf16
/// rounding of the host-side sum and of f64 `X A B`; `measure` runs pure TP over the 4 GPUs.
fn tp_cta_four_gpus(_cx: &Context) -> Result<(), String> {
    let count = Context::device_count().map_err(fail)?;
    if count < 4 {
        return Err(skip(format!("needs 4 GPUs (nvidia-h200-x4), {count} present")));
    }
    nccl_or_skip()?;
    let (m, w) = (512usize, 1024usize);
    let devices = DeviceSet::open(&[0, 1, 2, 3]).map_err(fail)?;
    let mut rng = fresh_rng("tp_cta_four_gpus");
    let (x, a, b) = random_mlp(&mut rng, m, w);
    let opts = TpCtaOptions {
        width: w,
        groups: 2,
        iters: 2,
        policy: PolicyKind::RowSync,
        kernel: None,
    };
    let mut tpc = TpCta::new(&devices, m, &opts, &x, &a, &b).map_err(fail)?;
    ensure(tpc.all_reduce_ranks() == Ok(2), || {
        format!("{:?}", tpc.all_reduce_ranks())
    })?;
    tpc.poison().map_err(fail)?;
    tpc.run_compute().map_err(fail)?;
    tpc.run_all_reduce().map_err(fail)?;
    let sum = host_sum(&tpc.partials().map_err(fail)?);
    let reduced = tpc.reduced().map_err(fail)?;
    ensure(first_difference(&reduced[0], &reduced[1]).is_none(), || {
        "the two ranks' all-reduced Y differ".into()
    })?;
    let err = relative_error(&to_f64(&reduced[0]), &sum);
    ensure(err < 1e-2, || format!("all-reduce vs host-side sum: {err:.3e}"))?;
    let full = reference_y(&reference_h(&x, &a, m, w), &b, m, w, 0, w);
    let err = relative_error(&to_f64(&reduced[0]), &full);
    ensure(err < 2e-2, || format!("all-reduced Y vs f64 X A B: {err:.3e}"))?;
    drop(tpc);
    let row = tp_cta::measure(&devices, m, &opts, 3).map_err(fail)?;
    println!(
        "    4 GPUs, M = {m}, W = {w}: TP + CTA compute {:.3} ms, all-reduce {:?}; pure TP {:?}",
        row.compute.median,
        row.all_reduce.as_ref().map(|s| s.median),
        row.tp.as_ref().map(|t| t.total.median)
    );
    ensure(
        row.tp.as_ref().is_ok_and(|t| t.ranks == 4) && row.total.is_some(),
        || format!("{row:?}"),
    )
}
