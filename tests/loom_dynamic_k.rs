//! Loom model checks of dynamic K-chunks (`cusync_shared::dynamic_k`): the claim, slot and
//! count-in protocol the plain `_dyn` GeMM kernels run, over loom atomics.
//!
//! Each block of a model is a thread that claims chunks, "computes" chunk `c` as `1 << c`
//! into its run, and ends each run as the device's consumers do: a run that covered the tile
//! stores it; any other writes its partial into its slot (a loom `UnsafeCell`, so a read not
//! ordered after the write is a reported race), counts in, and the run that completes the
//! tile sums every slot. Checked in every interleaving (up to a preemption bound): each tile
//! stored exactly once with every chunk counted once, every counter zero after the launch.
//! Launch 0 runs first on the same words (single-threaded), so every model is also a
//! relaunch without clearing. One model runs with relaxed count-ins and must fail.

use cusync_shared::dynamic_k::{chunk_range, count_in, leave, slot, take_slot, DynClaims, DynLaunch, DynLayout};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

#[path = "loom/words.rs"]
mod words;
use words::{LoomWords, Weakness, BASE};

/// A model launch: tiles, chunks per tile, K-steps per tile, blocks.
#[derive(Clone, Copy)]
struct Shape {
    tiles: u32,
    chunks: u32,
    k_steps: u32,
    blocks: u32,
}

/// Partial slots and outputs, as loom cells; stores counted per tile.
struct Data {
    slots: Vec<UnsafeCell<u64>>,
    outputs: Vec<UnsafeCell<u64>>,
    stores: Vec<std::sync::atomic::AtomicU32>,
}

impl Data {
    fn new(s: Shape) -> Self {
        Self {
            slots: (0..s.tiles * s.chunks).map(|_| UnsafeCell::new(0)).collect(),
            outputs: (0..s.tiles).map(|_| UnsafeCell::new(0)).collect(),
            stores: (0..s.tiles).map(|_| std::sync::atomic::AtomicU32::new(0)).collect(),
        }
    }
}

/// Block `block`'s walk: every run it claims, ended as the device's consumers end it.
fn block(mem: &LoomWords, data: &Data, s: Shape, block: u32) {
    let launch = DynLaunch {
        counters: BASE,
        tiles: s.tiles,
        chunks: s.chunks,
    };
    let mut claims = DynClaims::new(block, s.tiles);
    let (mut acc, mut steps) = (0u64, 0u32);
    while let Some((t, c)) = claims.next(mem, &launch) {
        let (b, e) = chunk_range(s.k_steps, c, s.chunks);
        acc += 1 << c;
        steps += e - b;
        if claims.continues(s.chunks) {
            continue;
        }
        let sum = if steps == s.k_steps {
            Some(acc)
        } else {
            let run = take_slot(mem, &launch, t);
            data.slots[slot(t, run, s.chunks) as usize].with_mut(|p| unsafe { *p = acc });
            count_in(mem, &launch, t, steps, s.k_steps).map(|runs| {
                acc + (0..runs)
                    .filter(|&r| r != run)
                    .map(|r| data.slots[slot(t, r, s.chunks) as usize].with(|p| unsafe { *p }))
                    .sum::<u64>()
            })
        };
        if let Some(sum) = sum {
            data.outputs[t as usize].with_mut(|p| unsafe { *p = sum });
            data.stores[t as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        (acc, steps) = (0, 0);
    }
    leave(mem, &launch, s.blocks);
}

/// Launch 0 single-threaded, then launch 1 with every block a thread; checks both. Returns
/// how many executions loom explored.
fn dynamic_k_model(s: Shape, weakness: Weakness, bound: usize) -> usize {
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = executions.clone();
    let words = DynLayout { tiles: s.tiles }.words() as usize;
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound);
    builder.check(move || {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mem = Arc::new(LoomWords::new(&vec![0; words], weakness));
        let check = |data: &Data, launch: u32| {
            for t in 0..s.tiles as usize {
                let stores = data.stores[t].load(std::sync::atomic::Ordering::Relaxed);
                assert_eq!(stores, 1, "launch {launch}: tile {t} stored {stores} times");
                let got = data.outputs[t].with(|p| unsafe { *p });
                assert_eq!(
                    got,
                    (1 << s.chunks) - 1,
                    "launch {launch}: tile {t}: a chunk lost or doubled"
                );
            }
            // (A weakened memory also lets a claim land after the last block's reset; the
            // weakened model checks the data race alone.)
            for w in (0..words).filter(|_| weakness == Weakness::None) {
                let v = mem.get(BASE + 4 * w as u64);
                assert_eq!(v, 0, "launch {launch}: counter word {w} left at {v}");
            }
        };
        let first = Data::new(s);
        for b in 0..s.blocks {
            block(&mem, &first, s, b);
        }
        check(&first, 0);
        let data = Arc::new(Data::new(s));
        let threads: Vec<_> = (1..s.blocks)
            .map(|b| {
                let (mem, data) = (mem.clone(), data.clone());
                thread::spawn(move || block(&mem, &data, s, b))
            })
            .collect();
        block(&mem, &data, s, 0);
        for t in threads {
            t.join().unwrap();
        }
        check(&data, 1);
    });
    executions.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs the model with the real orderings and checks loom explored more than a hundred
/// executions (printed with `--nocapture`).
fn explore(what: &str, s: Shape, bound: usize) {
    let n = dynamic_k_model(s, Weakness::None, bound);
    eprintln!("{what}: {n} executions");
    assert!(n > 100, "{what}: only {n} executions explored");
}

/// Two blocks on one tile of two chunks: they race for the chunks from the first claim, and
/// the tile is summed from two runs, or stored whole by one block.
#[test]
fn two_blocks_share_one_tile() {
    let s = Shape {
        tiles: 1,
        chunks: 2,
        k_steps: 3,
        blocks: 2,
    };
    explore("two blocks, one tile", s, 4);
}

/// One block per tile (the MLP's B = 64 launches): each block's own tile, and whichever
/// finishes first steals the other's unclaimed chunk.
#[test]
fn one_block_per_tile_steals_the_others_chunk() {
    let s = Shape {
        tiles: 2,
        chunks: 2,
        k_steps: 2,
        blocks: 2,
    };
    explore("one block per tile", s, 2);
}

/// Three blocks on two tiles of three chunks: the third block steals from its first claim,
/// and a tile can be summed from three runs.
#[test]
fn three_blocks_two_tiles() {
    let s = Shape {
        tiles: 2,
        chunks: 3,
        k_steps: 4,
        blocks: 3,
    };
    explore("three blocks, two tiles", s, 2);
}

/// With the count-in's acquire-release (and its fence) relaxed, the run that sums a tile
/// reads another run's partial without ordering: loom reports the race.
#[test]
#[should_panic(expected = "Causality violation")]
fn relaxed_count_in_is_caught() {
    dynamic_k_model(
        Shape {
            tiles: 1,
            chunks: 2,
            k_steps: 2,
            blocks: 2,
        },
        Weakness::RelaxedRmw,
        3,
    );
}
