//! The first stream-mode protocol test: consumer launched first, on its own stream, waits per
//! block on semaphores that a producer on another stream posts. Also: a wait nobody posts
//! times out with a report naming the stage, tile and semaphore, and the context stays usable.

use cusync::cudarc::driver::{LaunchConfig, PushKernelArg};
use cusync::runtime::ErrorSlotBuffer;
use cusync::{Context, DeviceBuffer, Error, Stream};
use cusync_tests::{ensure, fail, GpuTest};

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "protocol::consumer_launched_first_sees_every_element",
        run: consumer_first,
    },
    GpuTest {
        name: "protocol::unposted_semaphore_times_out_and_context_recovers",
        run: timeout_then_recover,
    },
];

const BLOCKS: u32 = 96;
const N: u32 = 8192;
const THREADS: u32 = 256;

fn produced_value(b: u32, i: u32, epoch: u32) -> f32 {
    (b * 1000 + i % 1000) as f32 + 0.25 * epoch as f32
}

struct Pair {
    data: DeviceBuffer<f32>,
    sems: DeviceBuffer<u32>,
    out: DeviceBuffer<f32>,
    err: ErrorSlotBuffer,
}

impl Pair {
    fn new(cx: &Context) -> Result<Self, String> {
        Ok(Self {
            data: cx.upload(&vec![f32::NAN; (BLOCKS * N) as usize]).map_err(fail)?,
            sems: cx.alloc_zeros(BLOCKS as usize).map_err(fail)?,
            out: cx.upload(&vec![f32::NAN; (BLOCKS * N) as usize]).map_err(fail)?,
            err: ErrorSlotBuffer::new(cx).map_err(fail)?,
        })
    }
}

fn launch_consumer(
    cx: &Context,
    s: &Stream,
    p: &mut Pair,
    epoch: u32,
    perm_mul: u32,
    timeout_ns: u64,
) -> Result<(), String> {
    let f = cx.function("protocol_consumer").map_err(fail)?;
    let err = p.err.addr();
    let n = N;
    let mut b = s.raw().launch_builder(&f);
    b.arg(p.data.slice())
        .arg(p.sems.slice())
        .arg(p.out.slice_mut())
        .arg(&n)
        .arg(&epoch)
        .arg(&perm_mul)
        .arg(&err)
        .arg(&timeout_ns);
    unsafe {
        b.launch(LaunchConfig {
            grid_dim: (BLOCKS, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        })
    }
    .map_err(fail)?;
    Ok(())
}

fn launch_producer(cx: &Context, s: &Stream, p: &mut Pair, epoch: u32, delay_ns: u64) -> Result<(), String> {
    let f = cx.function("protocol_producer").map_err(fail)?;
    let n = N;
    let mut b = s.raw().launch_builder(&f);
    b.arg(p.data.slice_mut())
        .arg(p.sems.slice_mut())
        .arg(&n)
        .arg(&epoch)
        .arg(&delay_ns);
    unsafe {
        b.launch(LaunchConfig {
            grid_dim: (BLOCKS, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        })
    }
    .map_err(fail)?;
    Ok(())
}

fn check_pair(p: &Pair, epoch: u32, perm_mul: u32) -> Result<(), String> {
    p.err.check().map_err(fail)?;
    let v = p.out.download().map_err(fail)?;
    for c in 0..BLOCKS {
        let src = (c * perm_mul) % BLOCKS;
        for i in 0..N {
            let got = v[(c * N + i) as usize];
            let want = 2.0 * produced_value(src, i, epoch) + 1.0;
            ensure(got == want, || {
                format!("epoch {epoch}: consumer block {c} element {i}: {got}, expected {want}")
            })?;
        }
    }
    Ok(())
}

fn consumer_first(cx: &Context) -> Result<(), String> {
    let mut p = Pair::new(cx)?;
    let (producer_stream, consumer_stream) = (cx.new_stream().map_err(fail)?, cx.new_stream().map_err(fail)?);
    // Two launches without clearing the semaphores: epoch e waits for e + 1 posts.
    for (epoch, perm_mul) in [(0u32, 1u32), (1, 37)] {
        let t0 = std::time::Instant::now();
        launch_consumer(cx, &consumer_stream, &mut p, epoch, perm_mul, 2_000_000_000)?;
        // The producer starts 200 us late, so every consumer block really has to wait.
        launch_producer(cx, &producer_stream, &mut p, epoch, 200_000)?;
        consumer_stream.synchronize().map_err(fail)?;
        producer_stream.synchronize().map_err(fail)?;
        println!(
            "    epoch {epoch}: pair finished in {:.2} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
        check_pair(&p, epoch, perm_mul)?;
    }
    let sems = p.sems.download().map_err(fail)?;
    ensure(sems.iter().all(|&s| s == 2), || {
        format!("semaphores after two epochs: {:?}", &sems[..8])
    })
}

fn timeout_then_recover(cx: &Context) -> Result<(), String> {
    let mut p = Pair::new(cx)?;
    let s = cx.new_stream().map_err(fail)?;
    let timeout_ns = 50_000_000; // 50 ms
    let t0 = std::time::Instant::now();
    launch_consumer(cx, &s, &mut p, 0, 1, timeout_ns)?; // nobody posts
    s.synchronize().map_err(fail)?;
    let waited = t0.elapsed();
    match p.err.check() {
        Err(Error::SyncTimeout {
            stage,
            tile,
            address,
            seen,
            expected,
            what,
            ..
        }) => {
            println!("    reported: stage {stage} tile {tile} {what} at {address:#x} saw {seen} expected {expected} after {:.1} ms", waited.as_secs_f64() * 1e3);
            ensure(stage == 1 && tile < BLOCKS && seen == 0 && expected == 1, || {
                "wrong fields in the timeout report".into()
            })?;
            let sem_lo = p.sems.addr();
            ensure(address >= sem_lo && address < sem_lo + 4 * BLOCKS as u64, || {
                format!("address {address:#x} is not one of the semaphores")
            })?;
            ensure(address == p.sems.addr_of(tile as usize), || {
                "the reported semaphore is not the tile's".into()
            })?;
        }
        other => return Err(format!("expected a SyncTimeout, got {other:?}")),
    }
    ensure(waited.as_secs_f64() < 0.05 + 2.0, || format!("timeout took {waited:?}"))?;
    // The context is still usable: a correct pair on the same context gives correct results.
    let mut fresh = Pair::new(cx)?;
    let (ps, cs) = (cx.new_stream().map_err(fail)?, cx.new_stream().map_err(fail)?);
    launch_consumer(cx, &cs, &mut fresh, 0, 1, 2_000_000_000)?;
    launch_producer(cx, &ps, &mut fresh, 0, 0)?;
    cs.synchronize().map_err(fail)?;
    ps.synchronize().map_err(fail)?;
    check_pair(&fresh, 0, 1)
}
