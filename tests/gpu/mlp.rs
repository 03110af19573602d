//! The MLP (GeMM+GeLU -> GeMM, bf16 tensor-core kernels) in stream mode: every policy's output
//! is bitwise equal to StreamSync's (same kernels), and StreamSync matches an f64 reference; on
//! LLaMA-2-7B's sizes too. The cuBLAS baseline captured as a CUDA graph computes what plain
//! cuBLAS computes, on every replay; Policy::Auto's measured trial runs once and is then
//! answered from the process cache and from its file.

use cusync::baselines::cublas::Cublas;
use cusync::mlp::auto::{choose, forget, rounds_to_win, trial_plans, AutoOptions, Decision, TrialCache, TrialKey};
use cusync::mlp::compare::{measure, to_csv, CompareOptions};
use cusync::mlp::{first_difference, relative_error, Mlp, MlpKernel, MlpModel, MlpOrder, MlpPlan, MlpShape};
use cusync::ops::gemm::TileConfig;
use cusync::ops::gemm_sm90::{self, WgTile};
use cusync::shared::policy::PolicyKind;
use cusync::stream::DebugInjection;
use cusync::stream::{StreamGraph, WaitKernelPolicy};
use cusync::Context;
use cusync_tests::{ensure, fail, GpuTest};
use half::bf16;

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "mlp::policies_bitwise_equal_streamsync_small",
        run: small,
    },
    GpuTest {
        name: "mlp::path2_stream_stages_bitwise_equal_streamsync_every_order",
        run: path2_small,
    },
    GpuTest {
        name: "mlp::path2_stream_stages_delayed_posts_bitwise_equal_streamsync",
        run: path2_delayed_posts,
    },
    GpuTest {
        name: "mlp::path2_swapped_stream_stages_small_batches_bitwise_equal_streamsync",
        run: path2_swapped,
    },
    GpuTest {
        name: "mlp::path2_tile96_stream_stages_small_batches_bitwise_equal_streamsync",
        run: path2_tile96,
    },
    GpuTest {
        name: "mlp::path2_tile16_stream_stages_small_batches_bitwise_equal_streamsync",
        run: path2_tile16,
    },
    GpuTest {
        name: "mlp::path2_stream_stages_at_shallow_pipeline_depths_bitwise_equal_whole_ring",
        run: path2_stage_depths,
    },
    GpuTest {
        name: "mlp::path2_stream_stage_skipped_post_times_out_and_reports",
        run: path2_skipped_post,
    },
    GpuTest {
        name: "mlp::skinny_stream_stages_bitwise_equal_streamsync_traced_and_skipped_post",
        run: skinny_stages,
    },
    GpuTest {
        name: "mlp::gpt3_batch_256_rowsync_and_tilesync",
        run: gpt3_256,
    },
    GpuTest {
        name: "mlp::llama7b_policies_bitwise_equal_streamsync_and_sweep_row",
        run: llama7b,
    },
    GpuTest {
        name: "mlp::cublas_cuda_graph_matches_plain_cublas_on_every_replay",
        run: cublas_graph,
    },
    GpuTest {
        name: "mlp::auto_policy_trial_runs_once_then_is_cached_in_memory_and_file",
        run: auto_trial,
    },
];

fn check(cx: &Context, shape: MlpShape, tile: Option<MlpKernel>, waits: &[WaitKernelPolicy]) -> Result<(), String> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(3);
    println!(
        "    batch {} hidden {} ffn {}: seed {seed}",
        shape.batch, shape.hidden, shape.ffn
    );
    let mut mlp = Mlp::new(cx, shape, tile, seed).map_err(fail)?;
    let reference = stream_sync_outputs(&mut mlp)?;
    let err = mlp.check_rows(&[0, shape.batch / 3, shape.batch - 1]).map_err(fail)?;
    println!("    StreamSync vs f64 reference: {err:.2e} ({})", mlp.tile().name());
    ensure(err < 1e-2, || format!("relative error {err:.3e}"))?;
    // Every check also runs the consumer by programmatic dependent launch where the device
    // and build take it (sm_90a).
    let programmatic = gemm_sm90::device_supports(cx).then_some(WaitKernelPolicy::Programmatic);
    for policy in [PolicyKind::TileSync, PolicyKind::RowSync] {
        for wait in waits.iter().copied().chain(programmatic) {
            let v = Variant::new(policy, wait);
            let mut g = v.graph(&mlp)?;
            let run = graph_runs_equal(&mut mlp, &mut g, &reference, 2, |launch| {
                format!("{} launch {launch}", v.describe())
            })?;
            println!(
                "    {}: 2 launches bitwise equal, {:.1} us, wait kernels {:?}",
                v.describe(),
                run.elapsed_ms * 1e3,
                run.wait_kernels
            );
        }
    }
    Ok(())
}

/// One synchronized run of the MLP's stream-mode graph in the tests' loops: the policy, the
/// tile order of both stages, the wait kernel, whether the consumer is launched before its
/// producer, and whether the producer holds each post a pseudo-random 0..40 µs.
#[derive(Clone, Copy, Debug)]
struct Variant {
    policy: PolicyKind,
    order: MlpOrder,
    wait: WaitKernelPolicy,
    consumers_first: bool,
    delayed_posts: bool,
}

impl Variant {
    /// `policy` with `wait`, row-major, producers first, posts not delayed.
    fn new(policy: PolicyKind, wait: WaitKernelPolicy) -> Self {
        Self {
            policy,
            order: MlpOrder::RowMajor,
            wait,
            consumers_first: false,
            delayed_posts: false,
        }
    }

    fn order(self, order: MlpOrder) -> Self {
        Self { order, ..self }
    }

    fn consumers_first(self, consumers_first: bool) -> Self {
        Self {
            consumers_first,
            ..self
        }
    }

    fn delayed_posts(self, delayed_posts: bool) -> Self {
        Self { delayed_posts, ..self }
    }

    /// The graph on `mlp`, set up as this variant says.
    fn graph<'cx>(self, mlp: &Mlp<'cx>) -> Result<StreamGraph<'cx>, String> {
        let mut g = mlp.graph_ordered(self.policy, self.wait, self.order).map_err(fail)?;
        g.set_consumers_first(self.consumers_first);
        if self.delayed_posts {
            g.set_debug(cusync::stream::StageId(0), DebugInjection::RandomDelay(40_000))
                .map_err(fail)?;
        }
        Ok(g)
    }

    /// "RowSync ColumnMajor Always (consumers first: true, delayed posts: false)".
    fn describe(self) -> String {
        format!(
            "{} {:?} {:?} (consumers first: {}, delayed posts: {})",
            self.policy.name(),
            self.order,
            self.wait,
            self.consumers_first,
            self.delayed_posts
        )
    }
}

fn small(cx: &Context) -> Result<(), String> {
    let shape = MlpShape {
        batch: 300,
        hidden: 1024,
        ffn: 768,
    };
    check(
        cx,
        shape,
        Some(TileConfig::T64x64.into()),
        &[WaitKernelPolicy::Auto, WaitKernelPolicy::Always],
    )?;
    check(
        cx,
        shape,
        Some(TileConfig::T128x128.into()),
        &[WaitKernelPolicy::Always],
    )
}

/// The MLP's StreamSync outputs (H, Y) from NaN-poisoned buffers: the reference every
/// synchronized run must equal bit for bit.
fn stream_sync_outputs(mlp: &mut Mlp) -> Result<(Vec<bf16>, Vec<bf16>), String> {
    mlp.poison().map_err(fail)?;
    mlp.run_stream_sync().map_err(fail)?;
    mlp.outputs().map_err(fail)
}

/// Runs `g` `launches` times (at least once), each on NaN-poisoned outputs, and checks H and Y
/// bitwise equal to `reference` after each; `what(launch)` names the run in the failure
/// message. Returns the last run.
fn graph_runs_equal(
    mlp: &mut Mlp,
    g: &mut StreamGraph,
    reference: &(Vec<bf16>, Vec<bf16>),
    launches: u32,
    what: impl Fn(u32) -> String,
) -> Result<cusync::stream::StreamRun, String> {
    let mut last = None;
    for launch in 0..launches.max(1) {
        mlp.poison().map_err(fail)?;
        let run = mlp.run_graph(g).map_err(fail)?;
        let (h, y) = mlp.outputs().map_err(fail)?;
        for (name, got, want) in [("H", &h, &reference.0), ("Y", &y, &reference.1)] {
            if let Some(i) = first_difference(got, want) {
                return Err(format!(
                    "{}: {name} differs from StreamSync at element {i}",
                    what(launch)
                ));
            }
        }
        last = Some(run);
    }
    Ok(last.expect("at least one launch"))
}

/// RowSync for even `i`, TileSync for odd: the order loops' policy, so each order meets both.
fn alternating_policy(i: usize) -> PolicyKind {
    if i.is_multiple_of(2) {
        PolicyKind::RowSync
    } else {
        PolicyKind::TileSync
    }
}

/// Whether this device runs GeMM path 2 (else the path-2 tests say they are skipped).
fn path2_or_skip(cx: &Context) -> Result<(), String> {
    if gemm_sm90::device_supports(cx) {
        return Ok(());
    }
    Err(cusync_tests::skip("this device or build has no GeMM path 2 (sm_90a)"))
}

/// GeMM path 2 as stream-mode stages (persistent blocks, producer-thread waits, one consumer
/// thread posting): both tiles, TileSync and RowSync, every tile order (row, column, banded),
/// with and without the wait kernel, the consumer launched first, and relaunches of one graph;
/// outputs NaN-poisoned before each launch and bitwise equal to StreamSync on the same path-2
/// kernels, which match the f64 reference. Shapes with partial tiles in M, N and K, and with
/// split-K in either stage.
fn path2_small(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    let shapes = [
        MlpShape {
            batch: 300,
            hidden: 1024,
            ffn: 776,
        },
        MlpShape {
            batch: 1000,
            hidden: 2056,
            ffn: 1536,
        },
        // Few tiles and a long K in both GeMMs: split-K in the producer and the consumer
        // stage, whose units start mid-row and must still wait for everything they read.
        MlpShape {
            batch: 200,
            hidden: 1024,
            ffn: 4096,
        },
    ];
    let mut split_stages = 0;
    for shape in shapes {
        for wg in [WgTile::T128x128, WgTile::T128x256] {
            check(
                cx,
                shape,
                Some(wg.into()),
                &[WaitKernelPolicy::Auto, WaitKernelPolicy::Always],
            )?;
            let mut mlp = Mlp::new(cx, shape, Some(wg.into()), 17).map_err(fail)?;
            let reference = stream_sync_outputs(&mut mlp)?;
            let (g1, _) = mlp.grids();
            let orders = [
                MlpOrder::ColumnMajor,
                MlpOrder::Banded(2.min(g1.x.max(1))),
                MlpOrder::RowMajor,
            ];
            for (i, order) in orders.into_iter().enumerate() {
                let v = Variant::new(alternating_policy(i), WaitKernelPolicy::Always)
                    .order(order)
                    .consumers_first(i == 2);
                let mut g = v.graph(&mlp)?;
                // Every stage runs a block per work unit (tiles x split-K), up to the resident
                // slots, as StreamSync's launch of the same kernel does: a split stage on one
                // block per tile ran its units in two rounds.
                let slots = cx.info().sm_count * mlp.blocks_per_sm().map_err(fail)?;
                for st in g.spec().stages() {
                    let want = st.work_units().min(slots);
                    ensure(st.persistent_blocks == Some(want), || {
                        format!(
                            "{} stage `{}`: {:?} persistent blocks for {} tiles x split-K {} ({slots} slots)",
                            wg.name(),
                            st.name,
                            st.persistent_blocks,
                            st.grid.count(),
                            st.split_k
                        )
                    })?;
                    split_stages += usize::from(st.split_k > 1);
                }
                graph_runs_equal(&mut mlp, &mut g, &reference, 3, |launch| {
                    format!("{} {} launch {launch}", wg.name(), v.describe())
                })?;
            }
            println!(
                "    {} {}x{}x{}: column/banded/row orders, consumers first, 3 launches each: bitwise equal",
                wg.name(),
                shape.batch,
                shape.ffn,
                shape.hidden
            );
        }
    }
    ensure(split_stages > 0, || "no shape split K in a stream stage".to_string())
}

/// Path-2 stream stages whose producer stage holds every post a pseudo-random 0..40 µs (the
/// posting consumer thread waits before its fence and add, so the consumer stage's waits find
/// some rows posted and some not, and its tiles start in a different order each launch):
/// TileSync and RowSync, both tiles, the consumer launched first or not, and RowSync by
/// programmatic dependent launch, two launches of each graph; the outputs are NaN-poisoned before each launch and bitwise equal to StreamSync's. A
/// wait that let a tile read a row before its post would leave a poisoned or stale H.
fn path2_delayed_posts(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    let shape = MlpShape {
        batch: 640,
        hidden: 1024,
        ffn: 2048,
    };
    for wg in [WgTile::T128x128, WgTile::T128x256] {
        let mut mlp = Mlp::new(cx, shape, Some(wg.into()), 29).map_err(fail)?;
        let reference = stream_sync_outputs(&mut mlp)?;
        let variants = [
            (PolicyKind::TileSync, WaitKernelPolicy::Always),
            (PolicyKind::RowSync, WaitKernelPolicy::Always),
            (PolicyKind::RowSync, WaitKernelPolicy::Programmatic),
        ];
        for (i, (policy, wait)) in variants.into_iter().enumerate() {
            let v = Variant::new(policy, wait).delayed_posts(true).consumers_first(i == 1);
            let mut g = v.graph(&mlp)?;
            graph_runs_equal(&mut mlp, &mut g, &reference, 2, |launch| {
                format!("{} {} launch {launch}", wg.name(), v.describe())
            })?;
        }
        println!(
            "    {} {}x{}x{}: posts delayed 0..40 us, TileSync and RowSync, RowSync programmatic, 2 launches each: bitwise equal",
            wg.name(),
            shape.batch,
            shape.ffn,
            shape.hidden
        );
    }
    Ok(())
}

/// The small batches' swapped stages (`wg128x64`: both GeMMs run `C^T = B^T A^T` on the skinny
/// tile, so the kernel's tile `(tm, tn)` is the stage's `(tn, tm)` and the stage's dependent
/// input is the kernel's B, loaded after the wait while the weights load before it): batches 1,
/// 8, 64 and 100 (two row tiles, the second partial) on a K with a partial step, then the GPT-3
/// MLP at B = 1 and 64 (split-K in GeMM1); TileSync and RowSync, with and without the wait
/// kernel, every order, the consumer launched first, the producer's posts delayed 0..40 µs.
/// Outputs NaN-poisoned before each launch and bitwise equal to StreamSync on the same swapped
/// kernels, which match the f64 reference.
fn path2_swapped(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    small_batch_stages(cx, WgTile::T128x64, &[1, 8, 64, 100], &[1, 64])
}

/// The 64 x 96 tile's stages (unswapped; A's 64 rows a stage, so batches up to 64; 128-byte L2
/// promotion, as its plain launches): batches 1, 17 and 64 on a K with a partial step, then the
/// GPT-3 MLP at B = 32 and 64 (GeMM1's 64 tiles split in two); as [`path2_swapped`] checks.
fn path2_tile96(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    small_batch_stages(cx, WgTile::T64x96, &[1, 17, 64], &[32, 64])
}

/// The 128 x 16 tile's stages (swapped like the 128 x 64 ones, the batch as the kernel's 16
/// columns, 12 stages): batches 1, 8 and 16 on a K with a partial step, then the GPT-3 MLP at
/// B = 1 and 16 (GeMM1's 48 weight tiles split in two); as [`path2_swapped`] checks. A batch
/// of 17 rows is refused before anything runs.
fn path2_tile16(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    small_batch_stages(cx, WgTile::T128x16, &[1, 8, 16], &[1, 16])?;
    let wide = Mlp::new(cx, MlpShape::gpt3(17), Some(MlpKernel::Path2(WgTile::T128x16)), 1);
    ensure(
        wide.as_ref().is_err_and(|e| e.to_string().contains("at most 16 rows")),
        || {
            format!(
                "the 128x16 stages at B = 17 were not refused: {:?}",
                wide.as_ref().err()
            )
        },
    )
}

/// `tile`'s stages on `[batch, 1024] x [1024, 776] x [776, 1024]` for each of `small` and on
/// the GPT-3 MLP for each of `gpt3`: TileSync and RowSync, with and without the wait kernel,
/// every order, the consumer launched first, the producer's posts delayed 0..40 µs, two
/// launches each; outputs NaN-poisoned before each launch, bitwise equal to StreamSync on the
/// same kernels, which match the f64 reference. Some stage must split K.
fn small_batch_stages(cx: &Context, tile: WgTile, small: &[usize], gpt3: &[usize]) -> Result<(), String> {
    let kernel = MlpKernel::Path2(tile);
    let small = small.iter().map(|&batch| MlpShape {
        batch,
        hidden: 1024,
        ffn: 776,
    });
    let mut split_stages = 0;
    for shape in small.chain(gpt3.iter().map(|&b| MlpShape::gpt3(b))) {
        check(
            cx,
            shape,
            Some(kernel),
            &[WaitKernelPolicy::Auto, WaitKernelPolicy::Always],
        )?;
        let mut mlp = Mlp::new(cx, shape, Some(kernel), 31 + shape.batch as u64).map_err(fail)?;
        let reference = stream_sync_outputs(&mut mlp)?;
        let orders = [MlpOrder::ColumnMajor, MlpOrder::RowMajor, MlpOrder::Banded(1)];
        for (i, order) in orders.into_iter().enumerate() {
            let v = Variant::new(alternating_policy(i), WaitKernelPolicy::Always)
                .order(order)
                .consumers_first(i == 1)
                .delayed_posts(i == 2);
            let mut g = v.graph(&mlp)?;
            split_stages += g.spec().stages().iter().filter(|s| s.split_k > 1).count();
            graph_runs_equal(&mut mlp, &mut g, &reference, 2, |launch| {
                format!(
                    "{} {}x{}x{} {} launch {launch}",
                    kernel.name(),
                    shape.batch,
                    shape.ffn,
                    shape.hidden,
                    v.describe()
                )
            })?;
        }
        println!(
            "    {} {}x{}x{}: column/row/banded orders, consumers first, delayed posts, 2 launches each: bitwise equal",
            kernel.name(),
            shape.batch,
            shape.ffn,
            shape.hidden
        );
    }
    ensure(split_stages > 0, || format!("no {} stage split K", kernel.name()))
}

/// The GPT-3 MLP at B = 64 on the 64 x 96 stages and the swapped 128 x 64 stages at shallow
/// ring depths (`Mlp::with_pipeline_depth`: 2, where every stage's slot is reused most often,
/// and 5): StreamSync at that depth is bitwise equal to StreamSync on the whole ring (a depth
/// moves loads between slots, never the order of the sums), and TileSync and RowSync (consumers
/// first once, delayed posts once) bitwise equal to it; a depth the ring cannot take and a
/// depth on skinny stages are refused before anything runs.
fn path2_stage_depths(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    let shape = MlpShape::gpt3(64);
    for tile in [WgTile::T64x96, WgTile::T128x64] {
        let kernel = Some(MlpKernel::Path2(tile));
        let seed = 57;
        let mut whole = Mlp::new(cx, shape, kernel, seed).map_err(fail)?;
        let reference = stream_sync_outputs(&mut whole)?;
        let err = whole.check_rows(&[0, 31, 63]).map_err(fail)?;
        ensure(err < 1e-2, || {
            format!("{}: StreamSync relative error {err:.3e}", tile.name())
        })?;
        drop(whole);
        for depth in [2, 5] {
            let mut mlp = Mlp::with_pipeline_depth(cx, shape, kernel, seed, Some(depth)).map_err(fail)?;
            let shallow = stream_sync_outputs(&mut mlp)?;
            ensure(
                first_difference(&shallow.0, &reference.0).is_none()
                    && first_difference(&shallow.1, &reference.1).is_none(),
                || {
                    format!(
                        "{} depth {depth}: StreamSync differs from the whole ring's",
                        tile.name()
                    )
                },
            )?;
            for (i, policy) in [PolicyKind::TileSync, PolicyKind::RowSync].into_iter().enumerate() {
                let v = Variant::new(policy, WaitKernelPolicy::Auto)
                    .consumers_first(i == 0)
                    .delayed_posts(i == 1);
                let mut g = v.graph(&mlp)?;
                graph_runs_equal(&mut mlp, &mut g, &reference, 2, |launch| {
                    format!("{} depth {depth} {} launch {launch}", tile.name(), v.describe())
                })?;
            }
            println!(
                "    {} stages at depth {depth} of {}: StreamSync, TileSync, RowSync bitwise equal to the whole ring's StreamSync (error {err:.2e})",
                tile.name(),
                tile.shape().stages
            );
        }
        let over = tile.shape().stages + 1;
        let refused = Mlp::with_pipeline_depth(cx, shape, kernel, seed, Some(over));
        ensure(
            refused
                .as_ref()
                .is_err_and(|e| e.to_string().contains("pipeline depth")),
            || format!("{} depth {over}: not refused", tile.name()),
        )?;
    }
    let skinny = Mlp::with_pipeline_depth(cx, MlpShape::gpt3(8), Some(MlpKernel::Skinny), 5, Some(5));
    ensure(
        skinny.as_ref().is_err_and(|e| e.to_string().contains("path-2 stages")),
        || "a depth on skinny stages was not refused".to_string(),
    )
}

/// A path-2 producer stage whose tile skips its post: the consumer's producer thread times
/// out on that tile's semaphore, the run returns an error naming the stage and the tile, no
/// block hangs (the consumer warpgroups leave on the stop record), and the same graph then
/// runs correctly again.
fn path2_skipped_post(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    let shape = MlpShape {
        batch: 512,
        hidden: 1024,
        ffn: 1024,
    };
    let mut mlp = Mlp::new(cx, shape, Some(WgTile::T128x128.into()), 23).map_err(fail)?;
    let reference = stream_sync_outputs(&mut mlp)?;
    let mut g = mlp
        .graph(PolicyKind::TileSync, WaitKernelPolicy::Always)
        .map_err(fail)?;
    g.set_timeout(std::time::Duration::from_millis(200));
    let skipped = 5;
    g.set_debug(cusync::stream::StageId(0), DebugInjection::SkipPost(skipped))
        .map_err(fail)?;
    let started = std::time::Instant::now();
    let err = match mlp.run_graph(&mut g) {
        Ok(_) => return Err("a skipped post did not fail the run".into()),
        Err(e) => e.to_string(),
    };
    let took = started.elapsed();
    println!("    skipped post of tile {skipped}: {err} (after {took:?})");
    ensure(err.contains("stage 1"), || {
        format!("error does not name the waiting stage: {err}")
    })?;
    ensure(took < std::time::Duration::from_secs(20), || format!("took {took:?}"))?;
    g.set_debug(cusync::stream::StageId(0), DebugInjection::None)
        .map_err(fail)?;
    graph_runs_equal(&mut mlp, &mut g, &reference, 1, |_| "the graph's next run".to_string()).map(|_| ())
}

/// The small batches' skinny stages (`MlpKernel::Skinny`, the default for B <= 16 but on the
/// devices whose stages run the 128 x 16 tile instead: each
/// resident block streams a range of the weight, taken from the stage's counter; a column block
/// of the output is posted by whichever block completes it; a consumer segment waits on the
/// producer column tiles of its K prefix). Batches 1, 5 (a partial `m16` tile) and 16 on an MLP
/// whose ranges straddle column blocks (several segments per block, several contributors per
/// column block, K not a multiple of a chunk), then the GPT-3 MLP at B = 1 and 16. Per shape:
/// StreamSync (the plain skinny kernels) within 1e-2 of the f64 reference; TileSync and RowSync,
/// with the wait kernel or without (Auto), the consumer launched first, the producer's posts
/// delayed 0..40 µs; two launches each on NaN-poisoned outputs, bitwise equal to StreamSync.
/// At B = 1 also a traced run (one event per column block of each stage, times in order) and a
/// skipped post: the consumer's wait times out, the error names stage 1, and the next run of the
/// same graph is right again (the arrival counters were reset).
fn skinny_stages(cx: &Context) -> Result<(), String> {
    let kernel = MlpKernel::Skinny;
    let small = [1, 5, 16].map(|batch| MlpShape {
        batch,
        hidden: 4104,
        ffn: 2056,
    });
    // The default at B = 8, but where the 128 x 16 tile's stages take their place.
    let tile16 = MlpKernel::tile16_stages_are_default(cx.info(), 8, 6144, 12288);
    let expected = if tile16 {
        MlpKernel::Path2(WgTile::T128x16)
    } else {
        kernel
    };
    ensure(MlpKernel::default_for(cx, 8, 6144, 12288) == expected, || {
        format!("the GPT-3 MLP's default at B = 8 is not {}", expected.name())
    })?;
    for shape in small.into_iter().chain([1, 16].map(MlpShape::gpt3)) {
        let mut mlp = Mlp::new(cx, shape, Some(kernel), 41 + shape.batch as u64).map_err(fail)?;
        let reference = stream_sync_outputs(&mut mlp)?;
        let err = mlp.check_rows(&[0, shape.batch / 2, shape.batch - 1]).map_err(fail)?;
        ensure(err < 1e-2, || format!("skinny StreamSync relative error {err:.3e}"))?;
        let cases = [
            (PolicyKind::TileSync, WaitKernelPolicy::Auto, false, false),
            (PolicyKind::RowSync, WaitKernelPolicy::Always, true, false),
            (PolicyKind::TileSync, WaitKernelPolicy::Always, false, true),
            (PolicyKind::RowSync, WaitKernelPolicy::Auto, true, true),
        ];
        for (policy, wait, consumers_first, delayed) in cases {
            let v = Variant::new(policy, wait)
                .consumers_first(consumers_first)
                .delayed_posts(delayed);
            let mut g = v.graph(&mlp)?;
            graph_runs_equal(&mut mlp, &mut g, &reference, 2, |launch| {
                format!(
                    "skinny {}x{}x{} {} launch {launch}",
                    shape.batch,
                    shape.ffn,
                    shape.hidden,
                    v.describe()
                )
            })?;
        }
        let (b1, b2) = mlp.work_blocks();
        println!(
            "    skinny {}x{}x{} ({b1} + {b2} blocks): reference error {err:.2e}; TileSync/RowSync, wait kernel or not, consumers first, delayed posts, 2 launches each: bitwise equal",
            shape.batch, shape.ffn, shape.hidden
        );
        if shape.batch != 1 {
            continue;
        }
        // Traced: one event per column block of each stage, its times in order.
        let mut g = mlp
            .graph(PolicyKind::TileSync, WaitKernelPolicy::Always)
            .map_err(fail)?;
        g.set_trace(true).map_err(fail)?;
        mlp.poison().map_err(fail)?;
        let run = mlp.run_graph(&mut g).map_err(fail)?;
        let (h, y) = mlp.outputs().map_err(fail)?;
        ensure(
            first_difference(&h, &reference.0).is_none() && first_difference(&y, &reference.1).is_none(),
            || "traced skinny run differs from StreamSync".to_string(),
        )?;
        let (g1, g2) = mlp.grids();
        for (stage, (events, grid)) in run.traces.iter().zip([g1, g2]).enumerate() {
            ensure(events.len() == grid.count() as usize, || {
                format!(
                    "stage {stage}: {} events for {} column blocks",
                    events.len(),
                    grid.count()
                )
            })?;
            for (i, e) in events.iter().enumerate() {
                ensure(
                    e.stage == stage as u32
                        && e.tile == i as u32
                        && e.t_dispatch <= e.t_ready
                        && e.t_ready <= e.t_start
                        && e.t_start <= e.t_end,
                    || format!("stage {stage} column block {i}: event {e:?}"),
                )?;
            }
        }
        println!(
            "    skinny B = 1 traced: {} + {} column-block events, times in order",
            g1.count(),
            g2.count()
        );
        // A skipped post: the consumer times out, names itself, and the graph recovers.
        let mut g = mlp
            .graph(PolicyKind::TileSync, WaitKernelPolicy::Always)
            .map_err(fail)?;
        g.set_timeout(std::time::Duration::from_millis(200));
        let skipped = 5;
        g.set_debug(cusync::stream::StageId(0), DebugInjection::SkipPost(skipped))
            .map_err(fail)?;
        let started = std::time::Instant::now();
        let err = match mlp.run_graph(&mut g) {
            Ok(_) => return Err("a skipped skinny post did not fail the run".into()),
            Err(e) => e.to_string(),
        };
        let took = started.elapsed();
        println!("    skinny skipped post of column block {skipped}: {err} (after {took:?})");
        ensure(err.contains("stage 1"), || {
            format!("error does not name the waiting stage: {err}")
        })?;
        ensure(took < std::time::Duration::from_secs(20), || format!("took {took:?}"))?;
        g.set_debug(cusync::stream::StageId(0), DebugInjection::None)
            .map_err(fail)?;
        graph_runs_equal(&mut mlp, &mut g, &reference, 2, |l| {
            format!("the skinny graph's run {l} after the timeout")
        })?;
    }
    Ok(())
}

fn gpt3_256(cx: &Context) -> Result<(), String> {
    check(cx, MlpShape::gpt3(256), None, &[WaitKernelPolicy::Auto])
}

/// LLaMA-2-7B's MLP sizes (H = 4096, F = 11008) at batch 64: every policy bitwise equal to
/// StreamSync, StreamSync within 1e-2 of the f64 reference; then one sweep row (`cusync sweep
/// mlp --model llama7b`) with both cuBLAS variants timed and the model named in the CSV.
fn llama7b(cx: &Context) -> Result<(), String> {
    let shape = MlpModel::Llama7b.shape(64);
    check(cx, shape, None, &[WaitKernelPolicy::Auto])?;
    let opts = CompareOptions {
        samples: 3,
        policies: vec![PolicyKind::RowSync],
        orders: vec![MlpOrder::RowMajor],
        ..Default::default()
    };
    let row = measure(cx, shape, &opts).map_err(fail)?;
    let csv = to_csv(std::slice::from_ref(&row));
    println!(
        "    sweep row: StreamSync {:.1} us, {} {:.1} us, cuBLAS {:?} us, cuBLAS graph {:?} us",
        row.stream_sync_us.median,
        row.policies[0].name(),
        row.policies[0].stats.median,
        row.cublas_us.map(|s| s.median),
        row.cublas_graph_us.map(|s| s.median)
    );
    ensure(
        csv.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("llama7b,64,4096,11008,")),
        || format!("CSV row does not name the model and sizes:\n{csv}"),
    )?;
    let timed = |s: Option<cusync::microbench::Stats>| s.is_some_and(|s| s.median > 0.0 && s.median.is_finite());
    ensure(timed(row.cublas_us) && timed(row.cublas_graph_us), || {
        format!("cuBLAS {:?}, cuBLAS graph {:?}", row.cublas_us, row.cublas_graph_us)
    })
}

/// cuBLAS back to back captured as one CUDA graph: each replay (outputs NaN-poisoned before)
/// writes Y again, within 1e-2 of plain cuBLAS (bitwise when cuBLAS picks the same algorithms
/// under capture, which is printed), and a graph launch takes a finite, positive time.
fn cublas_graph(cx: &Context) -> Result<(), String> {
    let shape = MlpShape {
        batch: 300,
        hidden: 1024,
        ffn: 768,
    };
    let mut mlp = Mlp::new(cx, shape, None, 5).map_err(fail)?;
    let blas = Cublas::new(mlp.stream()).map_err(fail)?;
    mlp.poison().map_err(fail)?;
    mlp.run_cublas(&blas).map_err(fail)?;
    let (h_plain, y_plain) = mlp.outputs().map_err(fail)?;
    let f64s = |v: &[half::bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
    for replay in 0..3 {
        mlp.poison().map_err(fail)?;
        let ms = mlp.run_cublas_graph(&blas).map_err(fail)?;
        let (h, y) = mlp.outputs().map_err(fail)?;
        ensure(h.iter().chain(&y).all(|v| v.is_finite()), || {
            format!("replay {replay}: the graph left poisoned (NaN) elements")
        })?;
        let (eh, ey) = (
            relative_error(&f64s(&h), &f64s(&h_plain)),
            relative_error(&f64s(&y), &f64s(&y_plain)),
        );
        let bitwise = first_difference(&h, &h_plain).is_none() && first_difference(&y, &y_plain).is_none();
        println!(
            "    replay {replay}: {:.1} us, H {eh:.1e} Y {ey:.1e} from plain cuBLAS, bitwise {bitwise}",
            ms * 1e3
        );
        ensure(eh < 1e-2 && ey < 1e-2, || {
            format!("replay {replay}: H {eh:.3e}, Y {ey:.3e} from plain cuBLAS")
        })?;
        ensure(ms > 0.0 && ms.is_finite(), || format!("replay {replay}: {ms} ms"))?;
    }
    Ok(())
}

/// Policy::Auto with a trial on a small MLP: the first choice measures (StreamSync first, then
/// every policy the wave model names in each distinct tile order, each with a finite median,
/// and the plan the paired rule takes: the fastest policy that beat StreamSync in enough
/// rounds, else StreamSync), the second is answered from the process cache, and after
/// the process cache forgets it, from the JSON file; all three pick the same plan, and a
/// synchronized plan's graph is bitwise equal to StreamSync.
fn auto_trial(cx: &Context) -> Result<(), String> {
    let shape = MlpShape {
        batch: 512,
        hidden: 2048,
        ffn: 1536,
    };
    let tile: MlpKernel = TileConfig::T128x128.into();
    let dir = std::env::temp_dir().join(format!("cusync-gpu-auto-{}", std::process::id()));
    let file = dir.join("auto.json");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = AutoOptions {
        trial: true,
        samples: 3,
        cache_file: Some(file.clone()),
    };
    let key = TrialKey::new(cx.info(), shape, tile);
    forget(&key);
    let first = choose(cx, shape, Some(tile), &opts).map_err(fail)?;
    let trial = first.trial.clone().ok_or("no trial result")?;
    println!("    trial: {:?} -> {}", trial.candidates, first.plan.name());
    ensure(first.decision == Decision::Trial, || {
        format!("first: {:?}", first.decision)
    })?;
    let mut mlp = Mlp::new(cx, shape, Some(tile), 9).map_err(fail)?;
    let policies: Vec<_> = first.prediction.policies.iter().map(|o| o.policy).collect();
    let expected: Vec<String> = trial_plans(&mlp, &policies).iter().map(|p| p.spelling()).collect();
    let names: Vec<&String> = trial.candidates.iter().map(|(p, _)| p).collect();
    ensure(
        names.iter().map(|n| n.as_str()).eq(expected.iter().map(|n| n.as_str()))
            && expected[0] == "streamsync"
            && expected.len() > policies.len()
            && trial.candidates.iter().all(|(_, us)| us.is_finite() && *us > 0.0),
        || format!("candidates {:?}, expected {expected:?}", trial.candidates),
    )?;
    // The paired rule: the fastest policy that beat StreamSync in enough rounds, else StreamSync.
    let stream_sync_us = trial.candidates[0].1;
    ensure(
        trial.rounds_won.len() + 1 == trial.candidates.len()
            && trial.rounds_won.iter().all(|&(_, w)| w <= opts.samples)
            && trial.rounds_needed == rounds_to_win(opts.samples),
        || format!("rounds won {:?}, needed {}", trial.rounds_won, trial.rounds_needed),
    )?;
    let eligible = trial
        .candidates
        .iter()
        .skip(1)
        .filter(|(p, us)| *us < stream_sync_us && trial.rounds_won_by(p).is_some_and(|w| w >= trial.rounds_needed))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or("streamsync", |(p, _)| p.as_str());
    ensure(eligible == trial.plan, || {
        format!(
            "picked {} of {:?} (rounds won {:?})",
            trial.plan, trial.candidates, trial.rounds_won
        )
    })?;
    let second = choose(cx, shape, Some(tile), &opts).map_err(fail)?;
    ensure(second.decision == Decision::CachedInProcess, || {
        format!("second: {:?}", second.decision)
    })?;
    forget(&key);
    let third = choose(cx, shape, Some(tile), &opts).map_err(fail)?;
    ensure(third.decision == Decision::CachedInFile, || {
        format!("third: {:?}", third.decision)
    })?;
    ensure(second.plan == first.plan && third.plan == first.plan, || {
        format!("{:?} / {:?} / {:?}", first.plan, second.plan, third.plan)
    })?;
    ensure(TrialCache::open(&file).get(&key).is_some(), || {
        "the file lacks the entry".into()
    })?;
    // The chosen plan runs right (StreamSync is the reference itself).
    let reference = stream_sync_outputs(&mut mlp)?;
    if let MlpPlan::Synced { policy, order } = first.plan {
        let mut g = mlp.graph_ordered(policy, WaitKernelPolicy::Auto, order).map_err(fail)?;
        graph_runs_equal(&mut mlp, &mut g, &reference, 1, |_| first.plan.name())?;
    }
    forget(&key);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
