//! One GPU test per device intrinsic (device/src/ptx), each against what PTX specifies.

use cusync::cudarc::driver::{LaunchConfig, PushKernelArg};
use cusync::runtime::ErrorSlotBuffer;
use cusync::Context;
use cusync_tests::{ensure, fail, fresh_rng, GpuTest, POISON_U32};
use half::{bf16, f16};
use rand::Rng;

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "intrinsics::ids",
        run: ids,
    },
    GpuTest {
        name: "intrinsics::time_and_nanosleep",
        run: time_and_nanosleep,
    },
    GpuTest {
        name: "intrinsics::barriers_named_barriers_shuffle",
        run: barriers,
    },
    GpuTest {
        name: "intrinsics::atomics_gpu_and_sys",
        run: atomics,
    },
    GpuTest {
        name: "intrinsics::message_passing_gpu_scope",
        run: |cx| message_passing(cx, 0),
    },
    GpuTest {
        name: "intrinsics::message_passing_sys_scope",
        run: |cx| message_passing(cx, 1),
    },
    GpuTest {
        name: "intrinsics::message_passing_proxy_async_fence",
        run: |cx| message_passing(cx, 2),
    },
    GpuTest {
        name: "intrinsics::shared_memory_static_and_dynamic",
        run: shared_memory,
    },
    GpuTest {
        name: "intrinsics::cp_async_with_zero_fill",
        run: cp_async,
    },
    GpuTest {
        name: "intrinsics::ldmatrix_x4_trans_x2",
        run: ldmatrix,
    },
    GpuTest {
        name: "intrinsics::mma_m16n8k16_bf16",
        run: |cx| mma(cx, 0),
    },
    GpuTest {
        name: "intrinsics::mma_m16n8k16_f16",
        run: |cx| mma(cx, 1),
    },
];

fn cfg(grid: (u32, u32, u32), block: (u32, u32, u32), smem: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: grid,
        block_dim: block,
        shared_mem_bytes: smem,
    }
}

fn ids(cx: &Context) -> Result<(), String> {
    const WORDS: usize = 16;
    let (grid, block) = ((3u32, 2u32, 2u32), (32u32, 2u32, 1u32));
    let threads = (block.0 * block.1) as usize;
    let blocks = (grid.0 * grid.1 * grid.2) as usize;
    let mut out = cx.upload(&vec![POISON_U32; blocks * threads * WORDS]).map_err(fail)?;
    let f = cx.function("selftest_ids").map_err(fail)?;
    let s = cx.default_stream();
    let mut b = s.raw().launch_builder(&f);
    b.arg(out.slice_mut());
    unsafe { b.launch(cfg(grid, block, 0)) }.map_err(fail)?;
    let v = out.download().map_err(fail)?;
    let sms = cx.info().sm_count;
    let mut seen_sms = std::collections::HashSet::new();
    for bz in 0..grid.2 {
        for by in 0..grid.1 {
            for bx in 0..grid.0 {
                let bl = (bz * grid.1 + by) * grid.0 + bx;
                for ty in 0..block.1 {
                    for tx in 0..block.0 {
                        let tl = ty * block.0 + tx;
                        let g = (bl as usize * threads + tl as usize) * WORDS;
                        let w = &v[g..g + WORDS];
                        let expect = [tx, ty, 0, block.0, block.1, bx, by, bz, grid.0, grid.1, grid.2, tl % 32];
                        ensure(w[..12] == expect, || {
                            format!("block {bl} thread {tl}: ids {:?}, expected {expect:?}", &w[..12])
                        })?;
                        ensure(w[12] < w[13] && w[12] < sms.max(w[13]), || {
                            format!("smid {} not below nsmid {} / {sms} SMs", w[12], w[13])
                        })?;
                        ensure(w[14] == tl && w[15] == bl, || {
                            format!("linear ids {} {} expected {tl} {bl}", w[14], w[15])
                        })?;
                        seen_sms.insert(w[12]);
                    }
                }
            }
        }
    }
    ensure(seen_sms.len() > 1, || "all 12 blocks reported the same SM".into())
}

fn time_and_nanosleep(cx: &Context) -> Result<(), String> {
    let mut out = cx.upload(&[0u64; 4]).map_err(fail)?;
    let f = cx.function("selftest_time").map_err(fail)?;
    let s = cx.default_stream();
    let (sleeps, ns) = (200u32, 10_000u32);
    let mut b = s.raw().launch_builder(&f);
    b.arg(out.slice_mut()).arg(&sleeps).arg(&ns);
    unsafe { b.launch(cfg((1, 1, 1), (32, 1, 1), 0)) }.map_err(fail)?;
    let v = out.download().map_err(fail)?;
    let (dt, dc) = (v[1].wrapping_sub(v[0]), v[3].wrapping_sub(v[2]));
    println!(
        "    200 x nanosleep(10 us): {:.1} us by %globaltimer, {dc} cycles by %clock64",
        dt as f64 / 1e3
    );
    // nanosleep sleeps for [0, 2 * ns] per PTX; the timer must move, and not absurdly far.
    ensure(v[0] > 0 && dt > 0 && dt < 100_000_000, || {
        format!("globaltimer {} -> {}", v[0], v[1])
    })?;
    ensure(dc > 0, || format!("clock64 did not advance: {} -> {}", v[2], v[3]))
}

fn barriers(cx: &Context) -> Result<(), String> {
    let mut out = cx.upload(&vec![POISON_U32; 800]).map_err(fail)?;
    let f = cx.function("selftest_barriers").map_err(fail)?;
    let s = cx.default_stream();
    let mut b = s.raw().launch_builder(&f);
    b.arg(out.slice_mut());
    unsafe { b.launch(cfg((1, 1, 1), (256, 1, 1), 0)) }.map_err(fail)?;
    let v = out.download().map_err(fail)?;
    for t in 0..256u32 {
        let i = t as usize;
        ensure(v[i] == ((t + 1) % 256) * 3 + 1, || {
            format!("bar.sync: thread {t} read {}", v[i])
        })?;
        let half = t / 128;
        ensure(v[256 + i] == (half * 128 + (t + 1) % 128) * 5 + 2, || {
            format!("named barrier: thread {t} read {}", v[256 + i])
        })?;
        let lane = t % 32;
        ensure(v[544 + i] == ((t - lane) + (31 - lane)) * 11, || {
            format!("shfl: thread {t} got {}", v[544 + i])
        })?;
    }
    for lane in 0..32u32 {
        ensure(v[512 + lane as usize] == lane * 7 + 3, || {
            format!("bar.arrive/bar.sync: lane {lane} read {}", v[512 + lane as usize])
        })?;
    }
    Ok(())
}

fn atomics(cx: &Context) -> Result<(), String> {
    let n = 64 * 128u32;
    let mut counters = cx.alloc_zeros::<u32>(16).map_err(fail)?;
    let mut init = vec![0u32; 16];
    init[10] = 41;
    counters.upload(&init).map_err(fail)?;
    let mut out = cx.upload(&vec![POISON_U32; 3 * n as usize]).map_err(fail)?;
    let f = cx.function("selftest_atomics").map_err(fail)?;
    let s = cx.default_stream();
    let mut b = s.raw().launch_builder(&f);
    b.arg(counters.slice_mut()).arg(out.slice_mut()).arg(&n);
    unsafe { b.launch(cfg((64, 1, 1), (128, 1, 1), 0)) }.map_err(fail)?;
    let c = counters.download().map_err(fail)?;
    let o = out.download().map_err(fail)?;
    let expect = [
        (0, n),
        (1, 2 * n),
        (2, n),
        (3, 3 * n),
        (4, n),
        (5, n),
        (7, n),
        (9, n),
        (11, 42),
        (12, 43),
    ];
    for (i, e) in expect {
        ensure(c[i] == e, || format!("counter {i} = {}, expected {e}", c[i]))?;
    }
    // atom.add returned each old value exactly once.
    let mut olds: Vec<u32> = o[..n as usize].to_vec();
    olds.sort_unstable();
    ensure(olds.iter().enumerate().all(|(i, &v)| v == i as u32), || {
        "atom.add old values are not a permutation of 0..n".into()
    })?;
    // Exchange chains: old values plus the final value are {0, 1..=n}, each exactly once.
    for (k, final_idx) in [(1usize, 6usize), (2, 8)] {
        let mut chain: Vec<u32> = o[k * n as usize..(k + 1) * n as usize].to_vec();
        chain.push(c[final_idx]);
        chain.sort_unstable();
        ensure(chain.iter().enumerate().all(|(i, &v)| v == i as u32), || {
            format!("atom.exch chain {k} lost or duplicated a value")
        })?;
    }
    Ok(())
}

fn message_passing(cx: &Context, mode: u32) -> Result<(), String> {
    if mode == 2 && cusync::kernels::PTX_ARCH != "sm_90a" {
        println!(
            "    fence.proxy.async is sm_90a-only; this PTX is {}: checking the gpu-scope path instead",
            cusync::kernels::PTX_ARCH
        );
    }
    let (pairs, n) = (48u32, 4096u32);
    let mut data = cx.upload(&vec![POISON_U32; (pairs * n) as usize]).map_err(fail)?;
    let mut flags = cx.alloc_zeros::<u32>(pairs as usize).map_err(fail)?;
    let mut out = cx.upload(&vec![POISON_U32; (pairs * n) as usize]).map_err(fail)?;
    let err = ErrorSlotBuffer::new(cx).map_err(fail)?;
    let f = cx.function("selftest_message_passing").map_err(fail)?;
    let s = cx.default_stream();
    let err_addr = err.addr();
    let mut b = s.raw().launch_builder(&f);
    b.arg(data.slice_mut())
        .arg(flags.slice_mut())
        .arg(out.slice_mut())
        .arg(&n)
        .arg(&pairs)
        .arg(&mode)
        .arg(&err_addr);
    unsafe { b.launch(cfg((2 * pairs, 1, 1), (256, 1, 1), 0)) }.map_err(fail)?;
    s.synchronize().map_err(fail)?;
    err.check().map_err(fail)?;
    let v = out.download().map_err(fail)?;
    for p in 0..pairs {
        for i in 0..n {
            let got = v[(p * n + i) as usize];
            let want = p.wrapping_mul(0x9e37_79b9) ^ i;
            ensure(got == want, || {
                format!("mode {mode}: pair {p} element {i}: {got:#x}, expected {want:#x}")
            })?;
        }
    }
    Ok(())
}

fn shared_memory(cx: &Context) -> Result<(), String> {
    let words = 24 * 1024u32; // 96 KiB of dynamic shared memory: needs the opt-in attribute
    cx.set_max_dynamic_smem("selftest_smem", words * 4).map_err(fail)?;
    let mut out = cx.upload(&vec![POISON_U32; words as usize + 1024]).map_err(fail)?;
    let f = cx.function("selftest_smem").map_err(fail)?;
    let s = cx.default_stream();
    let mut b = s.raw().launch_builder(&f);
    b.arg(out.slice_mut()).arg(&words);
    unsafe { b.launch(cfg((1, 1, 1), (256, 1, 1), words * 4)) }.map_err(fail)?;
    let v = out.download().map_err(fail)?;
    for i in 0..words {
        let want = (words - 1 - i) ^ 0x5a5a_5a5a;
        ensure(v[i as usize] == want, || {
            format!("dynamic smem word {i}: {:#x}, expected {want:#x}", v[i as usize])
        })?;
    }
    for i in 0..1024u32 {
        let want = (1023 - i).wrapping_mul(2_654_435_761);
        ensure(v[(words + i) as usize] == want, || {
            format!(
                "static smem word {i}: {:#x}, expected {want:#x}",
                v[(words + i) as usize]
            )
        })?;
    }
    Ok(())
}

fn cp_async(cx: &Context) -> Result<(), String> {
    let threads = 256u32;
    let mut rng = fresh_rng("cp_async");
    let src: Vec<u8> = (0..threads * 16).map(|_| rng.random::<u8>() | 1).collect();
    let src_buf = cx.upload(&src).map_err(fail)?;
    let mut out = cx.upload(&vec![0xAAu8; (threads * 16) as usize]).map_err(fail)?;
    let f = cx.function("selftest_cp_async").map_err(fail)?;
    let s = cx.default_stream();
    let mut b = s.raw().launch_builder(&f);
    b.arg(src_buf.slice()).arg(out.slice_mut());
    unsafe { b.launch(cfg((1, 1, 1), (threads, 1, 1), threads * 16)) }.map_err(fail)?;
    let v = out.download().map_err(fail)?;
    for t in 0..threads {
        let copied = if t % 5 == 4 { t % 17 } else { 16 };
        for j in 0..16u32 {
            let i = (16 * t + j) as usize;
            let want = if j < copied { src[i] } else { 0 };
            ensure(v[i] == want, || {
                format!(
                    "chunk {t} byte {j}: {:#x}, expected {want:#x} ({copied} bytes copied)",
                    v[i]
                )
            })?;
        }
    }
    Ok(())
}

fn ldmatrix(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("ldmatrix");
    let m: Vec<u16> = (0..256).map(|_| rng.random()).collect();
    let src = cx.upload(&m).map_err(fail)?;
    let mut out = cx.upload(&vec![POISON_U32; 320]).map_err(fail)?;
    let f = cx.function("selftest_ldmatrix").map_err(fail)?;
    let s = cx.default_stream();
    let mut b = s.raw().launch_builder(&f);
    b.arg(src.slice()).arg(out.slice_mut());
    unsafe { b.launch(cfg((1, 1, 1), (32, 1, 1), 512)) }.map_err(fail)?;
    let v = out.download().map_err(fail)?;
    // Matrix j covers rows (j%2)*8.., cols (j/2)*8.. of the 16x16 source.
    let elem = |j: u32, r: u32, c: u32| m[(((j % 2) * 8 + r) * 16 + (j / 2) * 8 + c) as usize] as u32;
    for lane in 0..32u32 {
        let (r, c) = (lane / 4, 2 * (lane % 4));
        for j in 0..4u32 {
            let want = elem(j, r, c) | (elem(j, r, c + 1) << 16);
            let got = v[(lane * 4 + j) as usize];
            ensure(got == want, || {
                format!("ldmatrix.x4 lane {lane} reg {j}: {got:#x}, expected {want:#x}")
            })?;
            // .trans: the lane holds column r, rows c and c+1.
            let want_t = elem(j, c, r) | (elem(j, c + 1, r) << 16);
            let got_t = v[(128 + lane * 4 + j) as usize];
            ensure(got_t == want_t, || {
                format!("ldmatrix.x4.trans lane {lane} reg {j}: {got_t:#x}, expected {want_t:#x}")
            })?;
        }
        for j in 0..2u32 {
            let want = elem(j, r, c) | (elem(j, r, c + 1) << 16);
            let got = v[(256 + lane * 2 + j) as usize];
            ensure(got == want, || {
                format!("ldmatrix.x2 lane {lane} reg {j}: {got:#x}, expected {want:#x}")
            })?;
        }
    }
    Ok(())
}

fn mma(cx: &Context, kind: u32) -> Result<(), String> {
    let mut rng = fresh_rng("mma");
    let af: Vec<f32> = (0..256).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let bf: Vec<f32> = (0..128).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let cf: Vec<f32> = (0..128).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    // Round inputs to the input type; the reference uses exactly those values.
    let (a_bits, b_bits, a_vals, b_vals): (Vec<u16>, Vec<u16>, Vec<f64>, Vec<f64>) = if kind == 0 {
        let a: Vec<bf16> = af.iter().map(|&x| bf16::from_f32(x)).collect();
        let b: Vec<bf16> = bf.iter().map(|&x| bf16::from_f32(x)).collect();
        (
            a.iter().map(|x| x.to_bits()).collect(),
            b.iter().map(|x| x.to_bits()).collect(),
            a.iter().map(|x| x.to_f64()).collect(),
            b.iter().map(|x| x.to_f64()).collect(),
        )
    } else {
        let a: Vec<f16> = af.iter().map(|&x| f16::from_f32(x)).collect();
        let b: Vec<f16> = bf.iter().map(|&x| f16::from_f32(x)).collect();
        (
            a.iter().map(|x| x.to_bits()).collect(),
            b.iter().map(|x| x.to_bits()).collect(),
            a.iter().map(|x| x.to_f64()).collect(),
            b.iter().map(|x| x.to_f64()).collect(),
        )
    };
    let a = cx.upload(&a_bits).map_err(fail)?;
    let b = cx.upload(&b_bits).map_err(fail)?;
    let c = cx.upload(&cf).map_err(fail)?;
    let mut d = cx.upload(&vec![f32::NAN; 128]).map_err(fail)?;
    let f = cx.function("selftest_mma").map_err(fail)?;
    let s = cx.default_stream();
    let mut lb = s.raw().launch_builder(&f);
    lb.arg(a.slice())
        .arg(b.slice())
        .arg(c.slice())
        .arg(d.slice_mut())
        .arg(&kind);
    unsafe { lb.launch(cfg((1, 1, 1), (32, 1, 1), 0)) }.map_err(fail)?;
    let got: Vec<f64> = d.download().map_err(fail)?.iter().map(|&x| x as f64).collect();
    let mut reference = vec![0f64; 128];
    for i in 0..16 {
        for j in 0..8 {
            let mut acc = cf[i * 8 + j] as f64;
            for k in 0..16 {
                acc += a_vals[i * 16 + k] * b_vals[k * 8 + j];
            }
            reference[i * 8 + j] = acc;
        }
    }
    // Products of 8-bit/11-bit mantissas are exact in f32; only the f32 accumulation rounds.
    let err = cusync_tests::relative_error(&got, &reference);
    println!("    mma kind {kind}: relative error {err:.2e}");
    ensure(err < 1e-5, || {
        format!(
            "relative error {err:.3e} (kind {kind}); D[0]={} ref {}",
            got[0], reference[0]
        )
    })
}
