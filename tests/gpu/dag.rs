//! Random DAGs of f32 stages for the persistent-mode stress test: scalar GeMM stages (reading X
//! or an earlier stage; several reading one stage is fan-out) and sum stages (two earlier
//! stages of one width: fan-in), random ragged shapes, a random policy per edge (the built-in
//! ones `validate` accepts for a GeMM row dependency, and two custom ones), random tile orders,
//! random post delays, and block counts far below the tile count. A DAG runs either as one
//! persistent launch or as StreamSync: every stage its own kernel of the same tile code, in
//! stage order, one after the other.
//!
//! Everything random comes from one seed ([`Dag::random`]), so a failing DAG is rebuilt from
//! the seed its failure message prints.

use crate::chain::TILE;
use cusync::cudarc::driver::{LaunchConfig, PushKernelArg};
use cusync::persistent::{PersistentGraph, PersistentOptions, PersistentSpec, StageWork};
use cusync::plan::{EdgePolicy, StageOrder};
use cusync::shared::order::TileOrder;
use cusync::shared::policy::{validate, Dependency, PolicyKind, Post, Step, SyncPolicy, Wait};
use cusync::shared::{Grid, TileIdx};
use cusync::stream::DebugInjection;
use cusync::{Context, DeviceBuffer};
use cusync_tests::{ensure, fail, random_f32};
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// A custom policy: one semaphore for the whole producer; a consumer tile waits, before its
/// first step, for every producer tile (StreamSync written as a policy).
pub struct WholeProducer;

impl SyncPolicy for WholeProducer {
    fn semaphore_count(&self, _: Grid, _: Grid) -> u32 {
        1
    }

    fn post(&self, _: Grid, _: Grid, _: TileIdx) -> Option<Post> {
        Some(Post {
            semaphore: 0,
            amount: 1,
        })
    }

    fn wait(&self, p: Grid, _: Grid, _: TileIdx, s: Step) -> Option<Wait> {
        s.first_in_row.then_some(Wait {
            semaphore: 0,
            value: p.count(),
        })
    }
}

/// A custom policy: one semaphore per pair of producer rows; a consumer tile waits for both
/// rows of its row's pair.
pub struct RowPairs;

impl SyncPolicy for RowPairs {
    fn semaphore_count(&self, p: Grid, _: Grid) -> u32 {
        p.x.div_ceil(2)
    }

    fn post(&self, _: Grid, _: Grid, t: TileIdx) -> Option<Post> {
        Some(Post {
            semaphore: t.x / 2,
            amount: 1,
        })
    }

    fn wait(&self, p: Grid, _: Grid, _: TileIdx, s: Step) -> Option<Wait> {
        let pair = s.row / 2;
        let rows = (p.x - 2 * pair).min(2);
        s.first_in_row.then_some(Wait {
            semaphore: pair,
            value: rows * p.y * p.z,
        })
    }
}

/// What a stage computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `out = A W` with A = X (`input: None`) or stage `input`'s output; K is A's width.
    Gemm { input: Option<usize>, k: u32 },
    /// `out = out[a] + out[b]` (both of this stage's width).
    Sum { a: usize, b: usize },
}

/// An edge's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Builtin(PolicyKind),
    WholeProducer,
    RowPairs,
}

impl Choice {
    pub fn name(&self) -> String {
        match self {
            Choice::Builtin(PolicyKind::StridedSync { stride }) => format!("StridedSync{stride}"),
            Choice::Builtin(p) => p.name().to_string(),
            Choice::WholeProducer => "custom:WholeProducer".into(),
            Choice::RowPairs => "custom:RowPairs".into(),
        }
    }

    fn edge_policy(&self) -> EdgePolicy {
        match *self {
            Choice::Builtin(p) => EdgePolicy::Builtin(p),
            Choice::WholeProducer => EdgePolicy::Custom {
                name: "WholeProducer".into(),
                policy: Arc::new(WholeProducer),
            },
            Choice::RowPairs => EdgePolicy::Custom {
                name: "RowPairs".into(),
                policy: Arc::new(RowPairs),
            },
        }
    }
}

/// One random DAG with its inputs on the device.
pub struct Dag {
    pub seed: u64,
    pub m: u32,
    pub k0: u32,
    /// Per stage: what it computes and its output width.
    pub ops: Vec<(Op, u32)>,
    /// `(producer, consumer, policy)`.
    pub edges: Vec<(usize, usize, Choice)>,
    pub orders: Vec<StageOrder>,
    /// Per stage, the largest injected post delay in ns (0: none).
    pub delays: Vec<u32>,
    pub max_ctas: Option<u32>,
    /// Launch the graph twice (the second without clearing anything).
    pub relaunch: bool,
    x: DeviceBuffer<f32>,
    weights: Vec<Option<DeviceBuffer<f32>>>,
}

/// What one persistent run of a DAG did.
pub struct RunStats {
    pub tiles: u32,
    pub ctas: u32,
}

fn ragged(rng: &mut StdRng, max_tiles: u32) -> u32 {
    (rng.random_range(1..=max_tiles) * TILE)
        .saturating_sub(rng.random_range(0..4u32))
        .max(1)
}

fn launch_nosync(
    cx: &Context,
    s: &cusync::Stream,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &mut DeviceBuffer<f32>,
    (m, n, k): (u32, u32, u32),
) -> Result<(), String> {
    let f = cx.function("scalar_gemm_nosync").map_err(fail)?;
    let grid = Grid::covering(m, n, TILE, TILE, 1);
    let mut lb = s.raw().launch_builder(&f);
    lb.arg(a.slice())
        .arg(b.slice())
        .arg(c.slice_mut())
        .arg(&m)
        .arg(&n)
        .arg(&k);
    // SAFETY: argument types and order match `scalar_gemm_nosync`; the buffers hold the shapes.
    unsafe {
        lb.launch(LaunchConfig {
            grid_dim: (grid.x, grid.y, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        })
    }
    .map(|_| ())
    .map_err(fail)
}

impl Dag {
    /// A random DAG from `seed` (2 to 7 stages), its inputs uploaded. `sms` scales the block
    /// counts drawn.
    pub fn random(cx: &Context, seed: u64, sms: u32) -> Result<Self, String> {
        let mut rng = StdRng::seed_from_u64(seed);
        let m = if rng.random_bool(0.1) {
            rng.random_range(1..=40)
        } else {
            rng.random_range(1..=640)
        };
        let widths: Vec<u32> = (0..3).map(|_| ragged(&mut rng, 6)).collect();
        let k0 = ragged(&mut rng, 6);
        let n_stages = rng.random_range(2..=7usize);
        let mut ops: Vec<(Op, u32)> = vec![(Op::Gemm { input: None, k: k0 }, *widths.choose(&mut rng).unwrap())];
        for i in 1..n_stages {
            let pairs: Vec<(usize, usize)> = (0..i)
                .flat_map(|a| (a + 1..i).map(move |b| (a, b)))
                .filter(|&(a, b)| ops[a].1 == ops[b].1)
                .collect();
            let r: f64 = rng.random();
            let op = if i >= 2 && r < 0.3 && !pairs.is_empty() {
                let &(a, b) = pairs.choose(&mut rng).unwrap();
                (Op::Sum { a, b }, ops[a].1)
            } else if i >= 2 && r < 0.4 {
                (Op::Gemm { input: None, k: k0 }, *widths.choose(&mut rng).unwrap())
            } else {
                let p = if rng.random_bool(0.5) {
                    i - 1
                } else {
                    rng.random_range(0..i)
                };
                (
                    Op::Gemm {
                        input: Some(p),
                        k: ops[p].1,
                    },
                    *widths.choose(&mut rng).unwrap(),
                )
            };
            ops.push(op);
        }
        let grid = |n: u32| Grid::covering(m, n, TILE, TILE, 1);
        let mut edges = Vec::new();
        for (c, &(op, n)) in ops.iter().enumerate() {
            let producers = match op {
                Op::Gemm { input: Some(p), .. } => vec![p],
                Op::Gemm { input: None, .. } => vec![],
                Op::Sum { a, b } => vec![a, b],
            };
            for p in producers {
                let (pg, cg) = (grid(ops[p].1), grid(n));
                let mut candidates: Vec<Choice> = vec![Choice::WholeProducer, Choice::RowPairs];
                let mut kinds = vec![PolicyKind::TileSync, PolicyKind::RowSync];
                kinds.extend((2..=pg.y).map(|stride| PolicyKind::StridedSync { stride }));
                candidates.extend(
                    kinds
                        .into_iter()
                        .filter(|&k| validate(k, Dependency::GemmRow, pg, cg).is_ok())
                        .map(Choice::Builtin),
                );
                edges.push((p, c, *candidates.choose(&mut rng).unwrap()));
            }
        }
        let orders = ops
            .iter()
            .map(|&(_, n)| match rng.random_range(0..4) {
                0 => StageOrder::Builtin(TileOrder::RowMajor),
                1 => StageOrder::Builtin(TileOrder::ColumnMajor),
                2 => StageOrder::Builtin(TileOrder::StridedRowMajor {
                    stride: rng.random_range(2..=3),
                }),
                _ => {
                    let mut v: Vec<u32> = (0..grid(n).count()).collect();
                    v.shuffle(&mut rng);
                    StageOrder::Custom(v)
                }
            })
            .collect();
        let delays = ops
            .iter()
            .map(|_| {
                if rng.random_bool(0.8) {
                    rng.random_range(1..20_000)
                } else {
                    0
                }
            })
            .collect();
        let max_ctas = *[
            Some(1),
            Some(2),
            Some(3),
            Some(5),
            Some(8),
            Some((sms / 4).max(1)),
            Some(sms),
            None,
        ]
        .choose(&mut rng)
        .unwrap();
        let relaunch = rng.random_bool(0.3);
        let x = cx.upload(&random_f32(&mut rng, (m * k0) as usize)).map_err(fail)?;
        let weights = ops
            .iter()
            .map(|&(op, n)| match op {
                Op::Gemm { k, .. } => cx.upload(&random_f32(&mut rng, (k * n) as usize)).map(Some),
                Op::Sum { .. } => Ok(None),
            })
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        Ok(Self {
            seed,
            m,
            k0,
            ops,
            edges,
            orders,
            delays,
            max_ctas,
            relaunch,
            x,
            weights,
        })
    }

    /// Stage `i`'s tile grid.
    pub fn grid(&self, i: usize) -> Grid {
        Grid::covering(self.m, self.ops[i].1, TILE, TILE, 1)
    }

    /// Stages read by more than one consumer.
    pub fn fan_out(&self) -> usize {
        (0..self.ops.len())
            .filter(|&p| self.edges.iter().filter(|e| e.0 == p).count() > 1)
            .count()
    }

    /// Stages with two producers.
    pub fn fan_in(&self) -> usize {
        self.ops.iter().filter(|(op, _)| matches!(op, Op::Sum { .. })).count()
    }

    /// One line per stage and edge, to reproduce a failure by eye.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "seed {} (CUSYNC_DAG_SEED={} reruns it alone): m={} k0={} blocks={:?} relaunch={}\n",
            self.seed, self.seed, self.m, self.k0, self.max_ctas, self.relaunch
        );
        for (i, &(op, n)) in self.ops.iter().enumerate() {
            let order = match &self.orders[i] {
                StageOrder::Builtin(o) => format!("{o:?}"),
                StageOrder::Custom(_) => "random".into(),
            };
            s.push_str(&format!(
                "      stage {i}: {op:?} n={n} grid={:?} order={order} delay<{}ns\n",
                self.grid(i),
                self.delays[i]
            ));
        }
        for (p, c, choice) in &self.edges {
            s.push_str(&format!("      edge {p} -> {c}: {}\n", choice.name()));
        }
        s
    }

    /// NaN-poisoned outputs, one per stage.
    pub fn outputs(&self, cx: &Context) -> Result<Vec<DeviceBuffer<f32>>, String> {
        self.ops
            .iter()
            .map(|&(_, n)| cx.upload(&vec![f32::NAN; (self.m * n) as usize]).map_err(fail))
            .collect()
    }

    /// StreamSync: every stage its own launch, in stage order, each after the previous one
    /// finished: GeMMs are `scalar_gemm_nosync` (the persistent worker's tile code), sums a
    /// one-stage persistent launch of the sum worker (no dependencies inside it), checked
    /// against the host's f32 additions.
    pub fn stream_sync(&self, cx: &Context) -> Result<Vec<Vec<f32>>, String> {
        let mut outs = self.outputs(cx)?;
        let s = cx.new_stream().map_err(fail)?;
        for i in 0..self.ops.len() {
            let (op, n) = self.ops[i];
            let (before, rest) = outs.split_at_mut(i);
            match op {
                Op::Gemm { input, k } => {
                    let a = input.map_or(&self.x, |p| &before[p]);
                    let w = self.weights[i].as_ref().ok_or("a GeMM stage without weights")?;
                    launch_nosync(cx, &s, a, w, &mut rest[0], (self.m, n, k))?;
                    s.synchronize().map_err(fail)?;
                }
                Op::Sum { a, b } => {
                    let mut spec = PersistentSpec::new();
                    let work = StageWork::sum(&before[a], &before[b], &rest[0], self.m, n).map_err(fail)?;
                    spec.stage("sum", work);
                    PersistentGraph::new(cx, &spec, PersistentOptions::default())
                        .and_then(|mut g| g.run())
                        .map_err(fail)?;
                    let (va, vb) = (before[a].download().map_err(fail)?, before[b].download().map_err(fail)?);
                    let got = rest[0].download().map_err(fail)?;
                    let host: Vec<f32> = va.iter().zip(&vb).map(|(x, y)| x + y).collect();
                    crate::chain::bitwise_equal(&format!("stage {i}: sum worker vs host f32 addition"), &got, &host)?;
                }
            }
        }
        outs.iter().map(|o| o.download().map_err(fail)).collect()
    }

    /// The DAG as one persistent graph writing `outs`: launched once (twice when `relaunch`,
    /// outputs poisoned in between), with the injected delays.
    pub fn run_persistent(&self, cx: &Context, outs: &[DeviceBuffer<f32>]) -> cusync::Result<RunStats> {
        let mut spec = PersistentSpec::new();
        let mut ids = Vec::new();
        for (i, &(op, n)) in self.ops.iter().enumerate() {
            let work = match op {
                Op::Gemm { input, k } => {
                    let a = input.map_or(&self.x, |p| &outs[p]);
                    let w = self.weights[i].as_ref().expect("a GeMM stage has weights");
                    StageWork::scalar_gemm(a, w, &outs[i], self.m, n, k)?
                }
                Op::Sum { a, b } => StageWork::sum(&outs[a], &outs[b], &outs[i], self.m, n)?,
            };
            let id = spec.stage(format!("s{i}"), work);
            spec.set_order(id, self.orders[i].clone());
            ids.push(id);
        }
        for &(p, c, choice) in &self.edges {
            spec.edge(ids[p], ids[c], Dependency::GemmRow, choice.edge_policy());
        }
        let options = PersistentOptions {
            max_ctas: self.max_ctas,
            ..PersistentOptions::default()
        };
        let mut g = PersistentGraph::new(cx, &spec, options)?;
        for (i, &d) in self.delays.iter().enumerate() {
            if d > 0 {
                g.set_debug(ids[i], DebugInjection::RandomDelay(d))?;
            }
        }
        let launches = if self.relaunch { 2 } else { 1 };
        let mut ctas = 0;
        for launch in 0..launches {
            if launch > 0 {
                for o in outs {
                    poison(cx, o)?;
                }
            }
            ctas = g.run()?.ctas;
        }
        Ok(RunStats {
            tiles: g.total_tiles(),
            ctas,
        })
    }

    /// Every stage's output of `outs` bitwise equal to `want`'s.
    pub fn compare(&self, outs: &[DeviceBuffer<f32>], want: &[Vec<f32>]) -> Result<(), String> {
        for (i, (o, w)) in outs.iter().zip(want).enumerate() {
            let got = o.download().map_err(fail)?;
            crate::chain::bitwise_equal(&format!("stage {i}"), &got, w)?;
        }
        ensure(outs.len() == want.len(), || "stage count".into())
    }
}

/// Sets every byte of `buf` to 0xFF (NaN) through a shared borrow (a graph holds it borrowed).
fn poison(cx: &Context, buf: &DeviceBuffer<f32>) -> cusync::Result<()> {
    let s = cx.default_stream();
    cx.cuda()
        .bind_to_thread()
        .map_err(cusync::Error::driver("binding the context"))?;
    // SAFETY: the range is exactly the buffer's allocation; the graph's launches are
    // synchronized (`run` returned), so nothing else touches it until the next launch.
    unsafe { cusync::cudarc::driver::result::memset_d8_async(buf.addr(), 0xFF, buf.len() * 4, s.raw().cu_stream()) }
        .map_err(cusync::Error::driver("poisoning a buffer"))?;
    s.synchronize()
}
