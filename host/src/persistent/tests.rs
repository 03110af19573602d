//! CPU tests of persistent mode: the host-side checks (families, stage counts, block counts,
//! tile counts, orders), and the megakernel's scheduling algorithm (downstream-first polling,
//! prefetch, deferred posts flushed before any wait, counted termination) modelled by racing
//! threads over a planned protocol image through the same shared functions the device calls.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use cusync_shared::gemm::GemmParams;
use cusync_shared::order::TileOrder;
use cusync_shared::persistent::{
    poll_queues, poll_queues_committing, wait_queues, Poll, StageError, StageQueue, WaitError, MAX_STAGES,
    SM90_POST_RING,
};
use cusync_shared::policy::{for_each_read, Dependency, PolicyKind};
use cusync_shared::protocol::{
    post_producer_tile_lanes, prefill_head, prefill_slot, prefill_tail, slot_addr, wait_ticket, AtomicWords,
    LaunchWindow, ProtocolError, ProtocolMemory,
};
use cusync_shared::{Grid, TileIdx};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::*;
use crate::ops::gemm_sm90::WgTile;
use crate::plan::{Plan, ProtocolImage, StageId, StageOrder};
use crate::Error;

fn raw(kind: WorkerKind, m: u32, n: u32, ordinal: usize) -> StageWork<'static> {
    let p = GemmParams::dense(0x1000, 0x2000, 0x3000, 0, m, n, 64, 0);
    // SAFETY: never launched.
    unsafe { StageWork::from_raw(kind, p, ordinal) }
}

fn message(e: Error) -> String {
    e.to_string()
}

#[test]
fn specs_are_checked_before_any_device_work() {
    assert!(message(PersistentSpec::new().check(0).unwrap_err()).contains("at least one stage"));
    let mut mixed = PersistentSpec::new();
    mixed.stage("a", raw(WorkerKind::ScalarGemmF32, 64, 64, 0));
    mixed.stage("b", raw(WorkerKind::GemmBf16x128, 256, 256, 0));
    let msg = message(mixed.check(0).unwrap_err());
    assert!(msg.contains("stage `b`") && msg.contains("one worker family"), "{msg}");
    let mut elsewhere = PersistentSpec::new();
    elsewhere.stage("a", raw(WorkerKind::SumF32, 64, 64, 1));
    assert!(message(elsewhere.check(0).unwrap_err()).contains("device 1"));
    let mut many = PersistentSpec::new();
    for i in 0..=MAX_STAGES {
        many.stage(format!("s{i}"), raw(WorkerKind::ScalarGemmF32, 32, 32, 0));
    }
    assert!(message(many.check(0).unwrap_err()).contains("at most 32 stages"));
    let mut ok = PersistentSpec::new();
    let a = ok.stage("a", raw(WorkerKind::ScalarGemmF32, 64, 96, 0));
    let b = ok.stage("b", raw(WorkerKind::SumF32, 64, 96, 0));
    ok.edge(a, b, Dependency::GemmRow, PolicyKind::TileSync);
    assert_eq!(ok.check(0).unwrap(), Family::F32);
    assert_eq!(ok.plan_spec().stages[a.0].grid, Grid::new(2, 3, 1));
    // A cycle is the planner's refusal, as an invalid argument.
    ok.edge(b, a, Dependency::GemmRow, PolicyKind::TileSync);
    let err: Error = ok.plan_spec().plan().unwrap_err().into();
    assert!(message(err).contains("dependency cycle"));
}

#[test]
fn worker_grids_and_kernels_match_the_device() {
    assert_eq!(WorkerKind::ScalarGemmF32.grid(65, 32), Grid::new(3, 1, 1));
    assert_eq!(WorkerKind::SumF32.grid(32, 33), Grid::new(1, 2, 1));
    assert_eq!(WorkerKind::GemmBf16x128.grid(16384, 8192), Grid::new(128, 64, 1));
    assert_eq!(Family::Bf16x128.smem_bytes(), 64 * 1024);
    assert_eq!(Family::F32.smem_bytes(), 0);
    let names = crate::kernels::all_entry_points().collect::<Vec<_>>();
    for f in [Family::F32, Family::Bf16x128] {
        assert!(names.contains(&f.kernel()) && names.contains(&f.noprotocol_kernel()));
    }
    assert!(names.contains(&"persistent_prefill"));
    let codes = [WorkerKind::ScalarGemmF32, WorkerKind::SumF32, WorkerKind::GemmBf16x128].map(|k| k.code());
    assert!(codes[0] != codes[1] && codes[1] != codes[2] && codes[0] != codes[2]);
}

#[test]
fn block_counts_are_resident_and_refusals_say_why() {
    assert_eq!(resident_ctas("k", 0, 2, 132, None, 8192).unwrap(), 264);
    assert_eq!(resident_ctas("k", 0, 2, 132, Some(132), 8192).unwrap(), 132);
    assert_eq!(resident_ctas("k", 0, 2, 132, None, 16).unwrap(), 16);
    let msg = message(resident_ctas("persistent_bf16_128x128", 65536, 0, 132, None, 8).unwrap_err());
    assert!(
        msg.contains("occupancy 0") && msg.contains("could not make progress"),
        "{msg}"
    );
    let msg = message(resident_ctas("k", 0, 2, 132, Some(265), 8192).unwrap_err());
    assert!(msg.contains("only 264 can be resident"), "{msg}");
    assert!(resident_ctas("k", 0, 2, 132, Some(0), 8).is_err());
    assert_eq!(
        total_tiles(&[Grid::new(128, 64, 1), Grid::new(128, 64, 1)]).unwrap(),
        16384
    );
    assert!(total_tiles(&[Grid::new(1 << 15, 1 << 15, 1)]).is_err());
}

#[test]
fn full_orders_list_every_tile_in_the_stage_order() {
    let g = Grid::new(2, 3, 1);
    assert_eq!(
        full_order(g, &StageOrder::Builtin(TileOrder::RowMajor)),
        vec![0, 1, 2, 3, 4, 5]
    );
    assert_eq!(
        full_order(g, &StageOrder::Builtin(TileOrder::ColumnMajor)),
        vec![0, 3, 1, 4, 2, 5]
    );
    assert_eq!(
        full_order(g, &StageOrder::Custom(vec![5, 4, 3, 2, 1, 0])),
        vec![5, 4, 3, 2, 1, 0]
    );
}

/// The bound on every wait of the racing launches ([`Sim::launches`]), in clock reads of
/// [`AtomicWords`]' virtual clock (one tick each): a protocol bug that deadlocks the model then
/// fails its test (a timeout error, unwrapped) instead of hanging CI (one block waiting out
/// this bound took 33 s in a release build here). Every racing test passed 15 release and 6
/// debug runs in a row at 1 << 18 (session 48, 2 cores), so this leaves a margin of 256.
const SIM_WAIT_TICKS: u64 = 1 << 26;

/// A planned graph's protocol state in host atomics, with the device's stage order.
struct Sim {
    plan: Plan,
    image: ProtocolImage,
    words: Vec<AtomicU32>,
    /// Device stage index -> stage id.
    topo: Vec<StageId>,
    /// Per device index: the prefill list.
    ready: Vec<Vec<u32>>,
    /// Per device index: the upstream stages' mask ([`upstream_masks`]).
    upstream: Vec<u32>,
    no_dependencies: bool,
    /// `posted[s][t]`: launches in which tile t of stage s was posted.
    posted: Vec<Vec<AtomicU32>>,
    ran: Vec<Vec<AtomicU32>>,
    done: AtomicU32,
    aborted: AtomicBool,
    /// Committed tickets the path-2 schedulers' prefetches took before their slots were pushed.
    tickets: AtomicU32,
}

const BASE: u64 = 0x10_0000;

impl Sim {
    fn new(spec: &PersistentSpec, no_dependencies: bool) -> Self {
        Self::with_priority(spec, no_dependencies, SchedulePriority::DownstreamFirst)
    }

    /// The stages in the device order the graph gives them for `priority`.
    fn with_priority(spec: &PersistentSpec, no_dependencies: bool, priority: SchedulePriority) -> Self {
        let plan = spec.plan_spec().plan().unwrap();
        let image = ProtocolImage::new(&plan, BASE);
        let words = image.words.iter().map(|&w| AtomicU32::new(w)).collect();
        let topo = device_order(&plan.topo_order, priority);
        let upstream = upstream_masks(&plan, &topo);
        let ready = topo
            .iter()
            .map(|s| {
                if no_dependencies {
                    full_order(plan.stages[s.0].grid, &spec.plan_spec().stages[s.0].order)
                } else {
                    plan.stages[s.0].initial_ready.clone()
                }
            })
            .collect();
        let per_tile = |_: ()| -> Vec<Vec<AtomicU32>> {
            plan.stages
                .iter()
                .map(|s| (0..s.tiles()).map(|_| AtomicU32::new(0)).collect())
                .collect()
        };
        Self {
            posted: per_tile(()),
            ran: per_tile(()),
            plan,
            image,
            words,
            topo,
            ready,
            upstream,
            no_dependencies,
            done: AtomicU32::new(0),
            aborted: AtomicBool::new(false),
            tickets: AtomicU32::new(0),
        }
    }

    fn mem(&self) -> AtomicWords<'_> {
        AtomicWords::new(BASE, &self.words).with_backoff(|_| std::thread::yield_now())
    }

    fn queue_of(&self, i: u32) -> StageQueue {
        let s = self.topo[i as usize];
        StageQueue {
            queue: self.image.stages[s.0].queue,
            tiles: self.plan.stages[s.0].tiles(),
            upstream: self.upstream[i as usize],
        }
    }

    /// The prefill kernel (device/src/persistent/prefill.rs) for launch `epoch`.
    fn prefill(&self, epoch: u32, withhold: u32) {
        let mem = self.mem();
        for (i, list) in self.ready.iter().enumerate() {
            let q = self.queue_of(i as u32);
            let w = LaunchWindow::new(epoch, q.tiles);
            mem.store_relaxed(q.queue.counters, prefill_head(w));
            if withhold & (1 << i) != 0 {
                continue;
            }
            for (j, &tile) in list.iter().enumerate() {
                let slot = prefill_slot(w, j as u32, tile);
                let at = slot_addr(&q.queue, j as u32);
                mem.store_relaxed(at, slot.tile);
                mem.store_relaxed(at + 4, slot.seq);
            }
            mem.store_relaxed(q.queue.counters + 128, prefill_tail(w, list.len() as u32));
        }
    }

    /// Runs tile `tile` of device stage `i`: every producer tile it reads was posted in this
    /// launch (unless dependencies are off), and it runs once per launch.
    fn run_tile(&self, spec: &PersistentSpec, i: u32, tile: u32, epoch: u32) {
        let s = self.topo[i as usize];
        if !self.no_dependencies {
            for &e in &self.plan.stages[s.0].incoming {
                let edge = &spec.plan_spec().edges[e];
                let pg = self.plan.stages[edge.producer.0].grid;
                for_each_read(edge.dependency, pg, self.plan.stages[s.0].grid.tile(tile), |read| {
                    for z in 0..pg.z {
                        let pid = pg.linear(TileIdx::new(read.x, read.y, z));
                        let posted = self.posted[edge.producer.0][pid as usize].load(Ordering::SeqCst);
                        assert_eq!(posted, epoch + 1, "stage {} tile {tile} ran before producer {pid}", s.0);
                    }
                });
            }
        }
        let ran = self.ran[s.0][tile as usize].fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!(ran, epoch + 1, "stage {} tile {tile} ran twice", s.0);
    }

    /// Warp 0's post of a finished tile: every lane's share of the CSR rows, then the done count.
    fn post(&self, i: u32, tile: u32, epoch: u32, rng: &mut StdRng) -> Result<(), ProtocolError> {
        let s = self.topo[i as usize];
        self.posted[s.0][tile as usize].store(epoch + 1, Ordering::SeqCst);
        if !self.no_dependencies {
            let mem = self.mem();
            let mut lanes: Vec<u32> = (0..32).collect();
            lanes.shuffle(rng);
            for &e in &self.plan.stages[s.0].outgoing {
                for &lane in &lanes {
                    post_producer_tile_lanes(&mem, &self.image.edges[e], tile, epoch, lane, 32)?;
                }
            }
        }
        self.done.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// One block of the megakernel (device/src/persistent/megakernel.rs), as its thread 0 and
    /// warp 0 act: returns the tiles it ran, or the error that stopped it.
    fn block(&self, spec: &PersistentSpec, epoch: u32, timeout: u64, seed: u64) -> Result<u32, WaitError> {
        let mem = self.mem();
        let n = self.topo.len() as u32;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut finished = 0u32;
        let fail = |e: cusync_shared::persistent::StageError| {
            self.aborted.store(true, Ordering::SeqCst);
            WaitError::Failed(e)
        };
        let wait = |finished: &mut u32| {
            wait_queues(
                &mem,
                n,
                epoch,
                timeout,
                finished,
                |i| self.queue_of(i),
                || self.aborted.load(Ordering::SeqCst),
            )
            .map_err(|e| match e {
                WaitError::Failed(e) => fail(e),
                WaitError::Aborted => WaitError::Aborted,
            })
        };
        let mut item = wait(&mut finished)?;
        let mut pending: Option<(u32, u32)> = None;
        let mut ran = 0;
        let post_err = |e| {
            fail(cusync_shared::persistent::StageError {
                stage: u32::MAX,
                error: e,
            })
        };
        while let Poll::Tile { stage, tile } = item {
            self.run_tile(spec, stage, tile, epoch);
            ran += 1;
            if rng.random_bool(0.3) {
                std::thread::yield_now();
            }
            // Hidden work: post the previous tile, prefetch the next.
            if let Some((s, t)) = pending.take() {
                self.post(s, t, epoch, &mut rng).map_err(post_err)?;
            }
            let mut next = poll_queues(&mem, n, epoch, timeout, &mut finished, |i| self.queue_of(i)).map_err(fail)?;
            pending = Some((stage, tile));
            if next == Poll::Empty {
                // Nothing ready: post what the block holds before waiting.
                if let Some((s, t)) = pending.take() {
                    self.post(s, t, epoch, &mut rng).map_err(post_err)?;
                }
                next = wait(&mut finished)?;
            }
            item = next;
        }
        if let Some((s, t)) = pending {
            self.post(s, t, epoch, &mut rng).map_err(post_err)?;
        }
        Ok(ran)
    }

    /// One block of the path-2 megakernel (device/src/persistent/sm90.rs) as four racing
    /// threads: the scheduler warp pops tiles and hands each to the producer through a one-item
    /// hand-off (`device/src/persistent/handoff.rs`), popping the next only once the producer
    /// released the last (on the device, halfway through issuing that tile's loads; here,
    /// once the producer has put it into the pipeline); the producer feeds the consumers
    /// through a bounded pipeline (the shared-memory stages: it runs ahead of them); the
    /// consumers run the tiles in order and hand each finished one to the post warp through a
    /// bounded ring of `SM90_POST_RING` slots, then a stop; the post warp posts in order until
    /// the stop. Nothing but the ring links the posts to the scheduler, and nothing the block's
    /// current tile needs waits for the scheduler, so a scheduler waiting for work never holds
    /// back this block's own posts. As the device's (`PersistentWs::schedule`), each pop is a
    /// committing round first, else the blocking wait, and a committed ticket is waited for.
    /// Returns the tiles it ran.
    fn block_ws(&self, spec: &PersistentSpec, epoch: u32, timeout: u64, seed: u64) -> Result<u32, WaitError> {
        use std::sync::mpsc::sync_channel;
        let mem = &self.mem();
        let n = self.topo.len() as u32;
        let fail = |e: cusync_shared::persistent::StageError| {
            self.aborted.store(true, Ordering::SeqCst);
            WaitError::Failed(e)
        };
        let (to_consumers, from_producer) = sync_channel::<Option<(u32, u32)>>(2);
        let (to_post, from_consumers) = sync_channel::<Option<(u32, u32)>>(SM90_POST_RING as usize);
        let (handoff, handed) = sync_channel::<Result<Option<(u32, u32)>, WaitError>>(1);
        let (release, released) = sync_channel::<()>(1);
        std::thread::scope(|sc| {
            let consumers = sc.spawn(move || {
                let mut ran = 0;
                while let Ok(Some((stage, tile))) = from_producer.recv() {
                    self.run_tile(spec, stage, tile, epoch);
                    ran += 1;
                    let _ = to_post.send(Some((stage, tile)));
                }
                let _ = to_post.send(None);
                ran
            });
            let poster = sc.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed);
                while let Ok(Some((stage, tile))) = from_consumers.recv() {
                    if rng.random_bool(0.3) {
                        std::thread::yield_now();
                    }
                    self.post(stage, tile, epoch, &mut rng)?;
                }
                Ok::<(), ProtocolError>(())
            });
            sc.spawn(move || {
                let mut finished = 0u32;
                loop {
                    let polled = poll_queues_committing(mem, n, epoch, timeout, &mut finished, |i| self.queue_of(i));
                    let got = match polled {
                        Ok(Poll::Empty) => wait_queues(
                            mem,
                            n,
                            epoch,
                            timeout,
                            &mut finished,
                            |i| self.queue_of(i),
                            || self.aborted.load(Ordering::SeqCst),
                        ),
                        Ok(p) => {
                            if matches!(p, Poll::Ticket { .. }) {
                                self.tickets.fetch_add(1, Ordering::SeqCst);
                            }
                            Ok(p)
                        }
                        Err(e) => Err(fail(e)),
                    };
                    let item = match got {
                        Ok(Poll::Ticket { stage, position }) => {
                            let q = self.queue_of(stage);
                            let window = LaunchWindow::new(epoch, q.tiles);
                            wait_ticket(mem, &q.queue, window, position, timeout)
                                .map(|tile| Some((stage, tile)))
                                .map_err(|error| fail(StageError { stage, error }))
                        }
                        Ok(Poll::Tile { stage, tile }) => Ok(Some((stage, tile))),
                        Ok(Poll::Done | Poll::Empty) => Ok(None),
                        Err(WaitError::Failed(e)) => Err(fail(e)),
                        Err(WaitError::Aborted) => Err(WaitError::Aborted),
                    };
                    let stop = !matches!(item, Ok(Some(_)));
                    // The hand-off, then (for a tile) the producer's release before the next pop.
                    if handoff.send(item).is_err() || stop || released.recv().is_err() {
                        break;
                    }
                }
            });
            // The producer: each handed tile into the pipeline, then the release.
            let scheduled = loop {
                match handed.recv() {
                    Ok(Ok(Some(tile))) => {
                        let _ = to_consumers.send(Some(tile));
                        let _ = release.send(());
                    }
                    Ok(Ok(None)) | Err(_) => break Ok(()),
                    Ok(Err(e)) => break Err(e),
                }
            };
            drop(release);
            let _ = to_consumers.send(None); // the stop record
            let ran = consumers.join().unwrap();
            poster.join().unwrap().map_err(|e| {
                fail(cusync_shared::persistent::StageError {
                    stage: u32::MAX,
                    error: e,
                })
            })?;
            scheduled.map(|()| ran)
        })
    }

    /// Launches `epochs` times with `blocks` racing blocks; checks every tile ran once per
    /// launch and the counters end each launch exactly at their epoch targets.
    fn launches(&self, spec: &PersistentSpec, blocks: u32, epochs: u32, seed: u64) {
        self.launches_of(spec, blocks, epochs, seed, false)
    }

    /// [`Sim::launches`] with path-1 blocks ([`Sim::block`]) or path-2 ones ([`Sim::block_ws`]).
    fn launches_of(&self, spec: &PersistentSpec, blocks: u32, epochs: u32, seed: u64, path2: bool) {
        let total: u32 = self.plan.stages.iter().map(|s| s.tiles()).sum();
        for epoch in 0..epochs {
            self.prefill(epoch, 0);
            let ran: u32 = std::thread::scope(|sc| {
                let handles: Vec<_> = (0..blocks)
                    .map(|b| {
                        let seed = seed ^ (b as u64) << 32 ^ epoch as u64;
                        sc.spawn(move || {
                            if path2 {
                                self.block_ws(spec, epoch, SIM_WAIT_TICKS, seed)
                            } else {
                                self.block(spec, epoch, SIM_WAIT_TICKS, seed)
                            }
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap().unwrap()).sum()
            });
            assert_eq!(ran, total, "launch {epoch}");
            assert_eq!(self.done.load(Ordering::SeqCst), (epoch + 1) * total);
            let mem = self.mem();
            for (s, m) in self.image.stages.iter().enumerate() {
                let end = (epoch + 1) * self.plan.stages[s].tiles();
                assert_eq!(
                    mem.get(m.queue.counters + 128),
                    end,
                    "stage {s} tail after launch {epoch}"
                );
                // The head: at the end, or past it by at most one fetch-add pop per block (each
                // block's pop that found the fully pushed queue finished).
                let past = mem.get(m.queue.counters).wrapping_sub(end);
                assert!(
                    past <= blocks,
                    "stage {s} head {past} past the end after launch {epoch}"
                );
            }
            for (s, tiles) in self.ran.iter().enumerate() {
                assert!(tiles.iter().all(|t| t.load(Ordering::SeqCst) == epoch + 1), "stage {s}");
            }
        }
    }
}

fn f32_stage(spec: &mut PersistentSpec<'static>, name: &str, m: u32, n: u32) -> StageId {
    spec.stage(name, raw(WorkerKind::ScalarGemmF32, m, n, 0))
}

#[test]
fn racing_blocks_run_a_chain_over_three_launches() {
    let policies = [
        PolicyKind::RowSync,
        PolicyKind::TileSync,
        PolicyKind::StridedSync { stride: 2 },
    ];
    for (seed, policy) in (0..12).zip(policies.into_iter().cycle()) {
        let mut spec = PersistentSpec::new();
        let a = f32_stage(&mut spec, "a", 128, 128); // 4 x 4 tiles
        let b = f32_stage(&mut spec, "b", 128, 64);
        let c = f32_stage(&mut spec, "c", 128, 128);
        spec.edge(a, b, Dependency::GemmRow, policy)
            .edge(b, c, Dependency::GemmRow, policy);
        let mut perm: Vec<u32> = (0..16).collect();
        perm.shuffle(&mut StdRng::seed_from_u64(seed));
        spec.set_order(a, StageOrder::Custom(perm));
        let priority = if seed % 2 == 0 {
            SchedulePriority::DownstreamFirst
        } else {
            SchedulePriority::UpstreamFirst
        };
        Sim::with_priority(&spec, false, priority).launches(&spec, 5, 3, seed);
    }
}

#[test]
fn upstream_first_reverses_the_device_order() {
    let topo = [StageId(2), StageId(0), StageId(1)];
    assert_eq!(device_order(&topo, SchedulePriority::DownstreamFirst), topo.to_vec());
    assert_eq!(
        device_order(&topo, SchedulePriority::UpstreamFirst),
        vec![StageId(1), StageId(0), StageId(2)]
    );
    assert_eq!(SchedulePriority::parse("up").unwrap(), SchedulePriority::UpstreamFirst);
    assert!(SchedulePriority::parse("sideways")
        .unwrap_err()
        .to_string()
        .contains("down or up"));
}

#[test]
fn racing_blocks_run_fan_out_and_fan_in() {
    // x -> h; h -> p, h -> q (fan-out); p + q -> s (fan-in).
    let mut spec = PersistentSpec::new();
    let h = f32_stage(&mut spec, "h", 96, 64);
    let p = f32_stage(&mut spec, "p", 96, 64);
    let q = f32_stage(&mut spec, "q", 96, 32);
    let s = spec.stage("s", raw(WorkerKind::SumF32, 96, 64, 0));
    spec.edge(h, p, Dependency::GemmRow, PolicyKind::RowSync)
        .edge(h, q, Dependency::GemmRow, PolicyKind::TileSync)
        .edge(p, s, Dependency::GemmRow, PolicyKind::TileSync)
        .edge(q, s, Dependency::GemmRow, PolicyKind::RowSync);
    let sim = Sim::new(&spec, false);
    assert_eq!(sim.plan.stages[s.0].needed, vec![2 + 1; 6]);
    sim.launches(&spec, 4, 3, 7);
}

#[test]
fn more_blocks_than_tiles_and_one_block_both_terminate() {
    let mut spec = PersistentSpec::new();
    let a = f32_stage(&mut spec, "a", 64, 64);
    let b = f32_stage(&mut spec, "b", 64, 64);
    spec.edge(a, b, Dependency::GemmRow, PolicyKind::RowSync);
    Sim::new(&spec, false).launches(&spec, 12, 2, 11);
    Sim::new(&spec, false).launches(&spec, 1, 2, 12);
}

#[test]
fn no_dependencies_mode_prefills_everything_and_posts_nothing() {
    let mut spec = PersistentSpec::new();
    let a = f32_stage(&mut spec, "a", 64, 96);
    let b = f32_stage(&mut spec, "b", 64, 96);
    spec.edge(a, b, Dependency::GemmRow, PolicyKind::RowSync);
    let sim = Sim::new(&spec, true);
    sim.launches(&spec, 3, 3, 5);
    // The scoreboards were never touched: a later pipelined launch would start clean.
    let mem = sim.mem();
    let sb = sim.image.stages[b.0].scoreboard;
    assert!((0..sb.len).all(|i| mem.get(sb.counters + 4 * i as u64) == 0));
}

/// Path-1 blocks ([`Sim::block`]) and path-2 ones ([`Sim::block_ws`]: the scheduler, the
/// producer, the consumers and the post warp all leave) alike.
#[test]
fn a_withheld_prefill_times_out_naming_the_first_stage_queue() {
    for path2 in [false, true] {
        let mut spec = PersistentSpec::new();
        let a = f32_stage(&mut spec, "a", 64, 64);
        let b = f32_stage(&mut spec, "b", 64, 64);
        spec.edge(a, b, Dependency::GemmRow, PolicyKind::RowSync);
        let sim = Sim::new(&spec, false);
        sim.prefill(0, 0b01);
        let block = |seed| {
            if path2 {
                sim.block_ws(&spec, 0, 10_000, seed)
            } else {
                sim.block(&spec, 0, 10_000, seed)
            }
        };
        let tail = sim.image.stages[a.0].queue.counters + 128;
        match block(0) {
            Err(WaitError::Failed(e)) => {
                assert_eq!(e.stage, 0);
                assert_eq!(
                    e.error,
                    ProtocolError::Timeout {
                        addr: tail,
                        seen: 0,
                        expected: 1
                    }
                );
            }
            other => panic!("path 2 {path2}: expected a timeout, got {other:?}"),
        }
        // Every other block stops at its next wait without a report of its own.
        assert_eq!(block(1), Err(WaitError::Aborted), "path 2 {path2}");
    }
}

fn sm90_stage(spec: &mut PersistentSpec<'static>, name: &str, tile: WgTile, m: u32, n: u32) -> StageId {
    spec.stage(name, raw(WorkerKind::sm90(tile).unwrap(), m, n, 0))
}

#[test]
fn path2_workers_have_path2_grids_kernels_and_blocks() {
    use cusync_shared::gemm_sm90::{WG_THREADS, WG_TILE_128X128, WG_TILE_128X256};
    let (k256, k128) = (WorkerKind::GemmSm90Bf16x256, WorkerKind::GemmSm90Bf16x128);
    assert_eq!(WorkerKind::sm90(WgTile::T128x256).unwrap(), k256);
    assert_eq!(WorkerKind::sm90(WgTile::T128x128).unwrap(), k128);
    assert!(WorkerKind::sm90(WgTile::T128x192)
        .unwrap_err()
        .to_string()
        .contains("128x192"));
    assert_eq!(k256.grid(16384, 8192), Grid::new(128, 32, 1));
    assert_eq!(k128.grid(1000, 776), Grid::new(8, 7, 1));
    assert_eq!(k256.grid(1000, 1032), Grid::new(8, 5, 1));
    assert_eq!(WorkerKind::GemmBf16x128.wg_tile(), None);
    for (k, f, shape, name) in [
        (
            k256,
            Family::Sm90Bf16x256,
            WG_TILE_128X256,
            "persistent_sm90_bf16_128x256",
        ),
        (
            k128,
            Family::Sm90Bf16x128,
            WG_TILE_128X128,
            "persistent_sm90_bf16_128x128",
        ),
    ] {
        assert_eq!(k.family(), f);
        assert_eq!(f.threads(), WG_THREADS);
        assert_eq!(f.smem_bytes(), shape.smem_bytes());
        assert_eq!(f.wg_tile(), k.wg_tile());
        assert_eq!(f.kernel(), name);
        assert_eq!(f.noprotocol_kernel(), format!("{name}_noprotocol"));
        assert!(crate::kernels::PERSISTENT_SM90_KERNELS.contains(&f.kernel()));
        assert!(crate::kernels::PERSISTENT_SM90_KERNELS.contains(&f.noprotocol_kernel()));
    }
    assert_eq!(Family::Bf16x128.threads(), 256);
    assert_eq!(Family::F32.wg_tile(), None);
    let codes = [WorkerKind::GemmBf16x128, k256, k128].map(|k| k.code());
    assert!(codes[0] != codes[1] && codes[1] != codes[2] && codes[0] != codes[2]);
}

#[test]
fn path2_graphs_refuse_mixed_tiles_and_mixed_paths() {
    let mut mixed = PersistentSpec::new();
    let a = sm90_stage(&mut mixed, "a", WgTile::T128x256, 1024, 1024);
    let b = sm90_stage(&mut mixed, "b", WgTile::T128x128, 1024, 1024);
    mixed.edge(a, b, Dependency::GemmRow, PolicyKind::RowSync);
    let msg = message(mixed.check(0).unwrap_err());
    assert!(msg.contains("stage `b`") && msg.contains("one tile shape"), "{msg}");
    let mut paths = PersistentSpec::new();
    sm90_stage(&mut paths, "a", WgTile::T128x128, 1024, 1024);
    paths.stage("b", raw(WorkerKind::GemmBf16x128, 1024, 1024, 0));
    let msg = message(paths.check(0).unwrap_err());
    assert!(msg.contains("one worker family"), "{msg}");
    // Raw stages are checked too: a transposed operand, a leading dimension TMA cannot use.
    for (flags, n) in [(cusync_shared::gemm::flags::B_TRANS, 1024), (0, 1020)] {
        let mut bad = PersistentSpec::new();
        let p = GemmParams::dense(0x1000, 0x2000, 0x3000, 0, 1000, n, 64, flags);
        // SAFETY: never launched.
        bad.stage("t", unsafe { StageWork::from_raw(WorkerKind::GemmSm90Bf16x128, p, 0) });
        let msg = message(bad.check(0).unwrap_err());
        assert!(msg.contains("stage `t`") && msg.contains("row-major"), "{msg}");
    }
    let mut ok = PersistentSpec::new();
    let a = sm90_stage(&mut ok, "a", WgTile::T128x128, 1000, 776);
    let b = sm90_stage(&mut ok, "b", WgTile::T128x128, 1000, 1032);
    ok.edge(a, b, Dependency::GemmRow, PolicyKind::TileSync);
    assert_eq!(ok.check(0).unwrap(), Family::Sm90Bf16x128);
    ok.plan_spec().plan().unwrap();
}

#[test]
fn stack_workers_pick_path_2_where_it_runs_and_refuse_what_cannot() {
    let w = [8192usize, 8192, 8192];
    // Default: path 2 where it runs, with the tile that fills the SMs.
    assert_eq!(
        pick_stack_worker(true, 132, 16384, &w, None, None).unwrap(),
        WorkerKind::GemmSm90Bf16x256
    );
    assert_eq!(
        pick_stack_worker(true, 132, 256, &[8192, 1024, 8192], None, None).unwrap(),
        WorkerKind::GemmSm90Bf16x128
    );
    assert_eq!(
        pick_stack_worker(false, 132, 16384, &w, None, None).unwrap(),
        WorkerKind::GemmBf16x128
    );
    assert_eq!(
        pick_stack_worker(true, 132, 16384, &w, Some(1), None).unwrap(),
        WorkerKind::GemmBf16x128
    );
    assert_eq!(
        pick_stack_worker(true, 132, 16384, &w, None, Some(WgTile::T128x128)).unwrap(),
        WorkerKind::GemmSm90Bf16x128
    );
    for (ok, path, tile, needle) in [
        (false, Some(2), None, "sm_90"),
        (false, None, Some(WgTile::T128x256), "sm_90"),
        (true, Some(1), Some(WgTile::T128x256), "path-2 tile"),
        (true, Some(3), None, "does not exist"),
    ] {
        let msg = message(pick_stack_worker(ok, 132, 16384, &w, path, tile).unwrap_err());
        assert!(msg.contains(needle), "{msg}");
    }
}

#[test]
fn path2_layer_configs_match_the_megakernel_tile_without_split_k() {
    let c = bench::layer_config(1000, 776, 520, WorkerKind::GemmSm90Bf16x256);
    assert_eq!((c.m, c.n, c.k), (1000, 776, 520));
    assert_eq!((c.wg_tile, c.split_k, c.tile), (Some(WgTile::T128x256), Some(1), None));
    let c = bench::layer_config(1000, 776, 520, WorkerKind::GemmBf16x128);
    assert_eq!(
        (c.wg_tile, c.tile),
        (None, Some(crate::ops::gemm::TileConfig::T128x128))
    );
}

#[test]
fn racing_path2_blocks_run_chains_and_a_dag_over_three_launches() {
    // Decoupled posts (a post warp behind a bounded ring) against racing schedulers: every tile
    // runs after the producer tiles it reads were posted, once per launch, counters exact.
    for (seed, policy) in (0..8).zip([PolicyKind::RowSync, PolicyKind::TileSync].into_iter().cycle()) {
        let mut spec = PersistentSpec::new();
        let tile = if seed % 4 < 2 {
            WgTile::T128x128
        } else {
            WgTile::T128x256
        };
        let a = sm90_stage(&mut spec, "a", tile, 1000, 776);
        let b = sm90_stage(&mut spec, "b", tile, 1000, 1032);
        let c = sm90_stage(&mut spec, "c", tile, 1000, 264);
        let d = sm90_stage(&mut spec, "d", tile, 1000, 1536);
        spec.edge(a, b, Dependency::GemmRow, policy)
            .edge(b, c, Dependency::GemmRow, policy)
            .edge(c, d, Dependency::GemmRow, policy);
        let tiles = spec.plan_spec().stages[a.0].grid.count();
        let mut perm: Vec<u32> = (0..tiles).collect();
        perm.shuffle(&mut StdRng::seed_from_u64(seed));
        spec.set_order(a, StageOrder::Custom(perm));
        let priority = if seed % 3 == 0 {
            SchedulePriority::UpstreamFirst
        } else {
            SchedulePriority::DownstreamFirst
        };
        Sim::with_priority(&spec, false, priority).launches_of(&spec, 1 + (seed as u32 % 4), 3, seed, true);
    }
    // The GeMM stack's banded rows in the raster order, both priorities.
    for (seed, priority) in [
        (21, SchedulePriority::DownstreamFirst),
        (22, SchedulePriority::UpstreamFirst),
    ] {
        let mut spec = PersistentSpec::new();
        let mut prev = None;
        for name in ["l0", "l1", "l2"] {
            let id = sm90_stage(&mut spec, name, WgTile::T128x128, 2000, 1024);
            let grid = spec.plan_spec().stages[id.0].grid;
            spec.set_order(id, super::bench::raster_order(grid, 8));
            if let Some(p) = prev {
                spec.edge(
                    p,
                    id,
                    Dependency::GemmRow,
                    super::bench::StackPolicy::Band { rows: 8 }.edge_policy(),
                );
            }
            prev = Some(id);
        }
        let sim = Sim::with_priority(&spec, false, priority);
        sim.launches_of(&spec, 5, 2, seed, true);
        // Upstream first, every block turns to a layer while its last band is being pushed:
        // the committing prefetch takes unpushed tickets there (17-32 per run seen; none
        // would mean the path is not exercised).
        let tickets = sim.tickets.load(Ordering::SeqCst);
        if priority == SchedulePriority::UpstreamFirst {
            assert!(tickets > 0, "no committed ticket in {priority:?}");
        }
    }
    // h -> p, h -> q (fan-out); p, q -> s (fan-in: s reads both halves of one buffer).
    let mut spec = PersistentSpec::new();
    let h = sm90_stage(&mut spec, "h", WgTile::T128x128, 1000, 776);
    let p = sm90_stage(&mut spec, "p", WgTile::T128x128, 1000, 264);
    let q = sm90_stage(&mut spec, "q", WgTile::T128x128, 1000, 264);
    let s = sm90_stage(&mut spec, "s", WgTile::T128x128, 1000, 1032);
    spec.edge(h, p, Dependency::GemmRow, PolicyKind::RowSync)
        .edge(h, q, Dependency::GemmRow, PolicyKind::TileSync)
        .edge(p, s, Dependency::GemmRow, PolicyKind::TileSync)
        .edge(q, s, Dependency::GemmRow, PolicyKind::RowSync);
    Sim::new(&spec, false).launches_of(&spec, 3, 3, 99, true);
    Sim::new(&spec, true).launches_of(&spec, 2, 2, 98, true);
}

#[test]
fn upstream_masks_name_every_transitive_producer_in_device_indices() {
    // h -> p, h -> q, p -> s, q -> s, and x alone.
    let mut spec = PersistentSpec::new();
    let h = f32_stage(&mut spec, "h", 64, 64);
    let p = f32_stage(&mut spec, "p", 64, 64);
    let q = f32_stage(&mut spec, "q", 64, 64);
    let s = f32_stage(&mut spec, "s", 64, 64);
    let x = f32_stage(&mut spec, "x", 64, 64);
    spec.edge(h, p, Dependency::GemmRow, PolicyKind::RowSync)
        .edge(h, q, Dependency::GemmRow, PolicyKind::RowSync)
        .edge(p, s, Dependency::GemmRow, PolicyKind::RowSync)
        .edge(q, s, Dependency::GemmRow, PolicyKind::RowSync);
    let plan = spec.plan_spec().plan().unwrap();
    for priority in [SchedulePriority::DownstreamFirst, SchedulePriority::UpstreamFirst] {
        let device = device_order(&plan.topo_order, priority);
        let masks = upstream_masks(&plan, &device);
        let bit = |id: StageId| 1u32 << device.iter().position(|&d| d == id).unwrap();
        let mask_of = |id: StageId| masks[device.iter().position(|&d| d == id).unwrap()];
        assert_eq!(mask_of(h), 0);
        assert_eq!(mask_of(x), 0);
        assert_eq!(mask_of(p), bit(h));
        assert_eq!(mask_of(q), bit(h));
        assert_eq!(mask_of(s), bit(h) | bit(p) | bit(q), "{priority:?}");
    }
}

#[test]
fn the_starved_tile_is_the_one_with_the_fewest_completed_launches() {
    // Launch 1 (the second) stalled: tiles 2 and 3 completed one launch, the others two.
    let needed = [3, 3, 3, 3, 0];
    let counters = [6, 6, 4, 5, 0];
    assert_eq!(starved_tile(&needed, &counters), Some(2));
    // Ties go to the first tile; tiles that need nothing never count.
    assert_eq!(starved_tile(&[2, 2, 0], &[1, 1, 0]), Some(0));
    assert_eq!(starved_tile(&[0, 0], &[0, 0]), None);
    assert_eq!(starved_tile(&[], &[]), None);
}

#[test]
fn ablations_parse_and_unknown_ones_are_refused() {
    use super::knobs::parse_ablation;
    use cusync_shared::persistent::{
        FLAGS_ABLATE, FLAG_ABLATE_NO_FENCE, FLAG_ABLATE_NO_PDL, FLAG_ABLATE_NO_POSTS, FLAG_ABLATE_NO_PREFETCH,
    };
    assert_eq!(parse_ablation("").unwrap(), 0);
    assert_eq!(parse_ablation("no-posts").unwrap(), FLAG_ABLATE_NO_POSTS);
    assert_eq!(
        parse_ablation(" no-prefetch , no-posts ").unwrap(),
        FLAG_ABLATE_NO_POSTS | FLAG_ABLATE_NO_PREFETCH
    );
    assert_eq!(parse_ablation("no-fence").unwrap(), FLAG_ABLATE_NO_FENCE);
    assert_eq!(parse_ablation("no-pdl").unwrap(), FLAG_ABLATE_NO_PDL);
    assert_eq!(
        parse_ablation("no-posts,no-prefetch,no-fence,no-pdl").unwrap(),
        FLAGS_ABLATE
    );
    let err = parse_ablation("no-posts,fast").unwrap_err().to_string();
    assert!(err.contains("unknown ablation `fast`"), "{err}");
    assert!(err.contains("no-fence"), "the error lists the ablations: {err}");
}

#[test]
fn post_wait_hints_parse_within_bounds() {
    use super::knobs::parse_post_wait;
    assert_eq!(parse_post_wait("0").unwrap(), 0);
    assert_eq!(parse_post_wait(" 20000 ").unwrap(), 20_000);
    assert_eq!(parse_post_wait("1000000").unwrap(), super::MAX_POST_WAIT_NS);
    assert_eq!(parse_post_wait(" ").unwrap(), super::DEFAULT_POST_WAIT_NS);
    for bad in ["1000001", "-1", "2us"] {
        let err = parse_post_wait(bad).unwrap_err().to_string();
        assert!(err.contains("CUSYNC_POST_WAIT_NS"), "{bad}: {err}");
    }
}

#[test]
fn launches_without_posts_count_no_tiles_done() {
    use super::graph::tiles_done_expected;
    // Two posted launches of 128 tiles, then two ablated without posts.
    assert_eq!(tiles_done_expected(2, 0, 128), 256);
    assert_eq!(tiles_done_expected(4, 2, 128), 256);
    assert_eq!(tiles_done_expected(3, 3, 128), 0);
    // The counter wraps as the device's does.
    assert_eq!(tiles_done_expected(1 << 30, 0, 8), 0);
}
