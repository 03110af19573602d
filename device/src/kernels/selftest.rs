//! One GPU test kernel per intrinsic in `crate::ptx`: each writes what it observed to a buffer
//! that the host test (tests/gpu/intrinsics.rs) checks against what PTX specifies.

use crate::ptx::{atomics, barrier, copy, fence, ids, mma, smem, time};
use crate::sync::{self, WaitSite};
use cusync_shared::layout::ErrorSlot;

crate::static_shared!(fn selftest_static() -> *mut u32, cusync_selftest_static, 4096);

/// Words each thread writes in [`selftest_ids`].
pub const IDS_WORDS: usize = 16;

/// Every thread writes its ids: tid xyz, ntid xy, ctaid xyz, nctaid xyz, laneid, smid, nsmid,
/// thread_linear, block_linear.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_ids(out: *mut u32) {
    let threads = ids::ntid_x() * ids::ntid_y();
    let g = (ids::block_linear() * threads + ids::thread_linear()) as usize;
    let vals = [
        ids::tid_x(),
        ids::tid_y(),
        ids::tid_z(),
        ids::ntid_x(),
        ids::ntid_y(),
        ids::ctaid_x(),
        ids::ctaid_y(),
        ids::ctaid_z(),
        ids::nctaid_x(),
        ids::nctaid_y(),
        ids::nctaid_z(),
        ids::lane_id(),
        ids::sm_id(),
        ids::sm_id_bound(),
        ids::thread_linear(),
        ids::block_linear(),
    ];
    for (i, v) in vals.iter().enumerate() {
        unsafe { *out.add(g * IDS_WORDS + i) = *v };
    }
}

/// Thread 0 reads `%globaltimer` and `%clock64`, sleeps `sleeps` x `nanosleep(ns)`, reads them
/// again: out = [t0, t1, c0, c1].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_time(out: *mut u64, sleeps: u32, ns: u32) {
    if ids::thread_linear() != 0 {
        return;
    }
    let t0 = time::global_timer_ns();
    let c0 = time::clock64();
    for _ in 0..sleeps {
        time::nanosleep(ns);
    }
    let t1 = time::global_timer_ns();
    let c1 = time::clock64();
    unsafe {
        *out = t0;
        *out.add(1) = t1;
        *out.add(2) = c0;
        *out.add(3) = c1;
    }
}

/// 256 threads. out[0..256]: neighbour after `bar.sync 0`; out[256..512]: neighbour within a
/// 128-thread half after named barriers 1 and 2; out[512..544]: warp 1 reads what warp 0 wrote
/// before `bar.arrive 3, 64`; out[544..800]: `shfl.sync.idx` from lane 31 - lane.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_barriers(out: *mut u32) {
    let s = selftest_static();
    let t = ids::thread_linear();
    unsafe {
        *s.add(t as usize) = t * 3 + 1;
        barrier::sync_threads();
        *out.add(t as usize) = *s.add(((t + 1) % 256) as usize);

        let half = t / 128;
        let s2 = s.add(256);
        *s2.add(t as usize) = t * 5 + 2;
        barrier::named_sync(1 + half, 128);
        *out.add(256 + t as usize) = *s2.add((half * 128 + (t + 1) % 128) as usize);

        let s3 = s.add(512);
        let warp = t / 32;
        let lane = ids::lane_id();
        if warp == 0 {
            s3.add(lane as usize).write_volatile(lane * 7 + 3);
            barrier::named_arrive(3, 64);
        } else if warp == 1 {
            barrier::named_sync(3, 64);
            *out.add(512 + lane as usize) = s3.add(lane as usize).read_volatile();
        }
        *out.add(544 + t as usize) = barrier::shfl_idx(t * 11, 31 - lane);
    }
}

/// Grid-wide atomics, `n` threads in all. counters[0]: `atom.add.gpu` (old values -> out[0..n]);
/// [1]: `red.release.gpu` +2; [2]: `atom.add.sys`; [3]: `red.release.sys` +3; [4]: CAS-loop
/// increment, gpu; [5]: CAS-loop increment, sys; [6]: `atom.exch.gpu` of gid+1 (old -> out[n..2n]);
/// [7]: `atom.add.relaxed.gpu`; [8]: `atom.exch.sys` of gid+1 (old -> out[2n..3n]);
/// [9]: `atom.add.relaxed.sys`. Thread 0 then reads [10] with `ld.acquire` after the host set it.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_atomics(counters: *mut u32, out: *mut u32, n: u32) {
    let gid = ids::block_linear() * ids::ntid_x() + ids::tid_x();
    if gid >= n {
        return;
    }
    let n = n as usize;
    let g = gid as usize;
    unsafe {
        *out.add(g) = atomics::atom_add_gpu(counters, 1);
        atomics::red_release_add_gpu(counters.add(1), 2);
        atomics::atom_add_sys(counters.add(2), 1);
        atomics::red_release_add_sys(counters.add(3), 3);
        cas_increment(counters.add(4), false);
        cas_increment(counters.add(5), true);
        *out.add(n + g) = atomics::atom_exch_gpu(counters.add(6), gid + 1);
        atomics::atom_add_relaxed_gpu(counters.add(7), 1);
        *out.add(2 * n + g) = atomics::atom_exch_sys(counters.add(8), gid + 1);
        atomics::atom_add_relaxed_sys(counters.add(9), 1);
        if gid == 0 {
            let v = atomics::ld_acquire_gpu(counters.add(10));
            let w = atomics::ld_acquire_sys(counters.add(10));
            atomics::st_release_gpu(counters.add(11), v + 1);
            atomics::st_release_sys(counters.add(12), w + 2);
        }
    }
}

/// Increments `*c` with a load + CAS retry loop (gpu or sys scope).
unsafe fn cas_increment(c: *mut u32, sys: bool) {
    loop {
        let (v, old) = unsafe {
            if sys {
                let v = atomics::ld_relaxed_sys(c);
                (v, atomics::atom_cas_sys(c, v, v + 1))
            } else {
                let v = atomics::ld_relaxed_gpu(c);
                (v, atomics::atom_cas_gpu(c, v, v + 1))
            }
        };
        if old == v {
            return;
        }
    }
}

/// Message passing between blocks: blocks `0..pairs` produce `n` words each into `data` and
/// post `flags[b]`; blocks `pairs..2*pairs` wait on their pair's flag and copy the words to
/// `out`. `mode` 0: gpu-scope post/wait; 1: sys-scope (`fence.sc.sys`, `.sys` release/acquire);
/// 2: gpu-scope plus `fence.proxy.async.global` after the acquire (sm_90a only).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_message_passing(
    data: *mut u32,
    flags: *mut u32,
    out: *mut u32,
    n: u32,
    pairs: u32,
    mode: u32,
    error: *mut ErrorSlot,
) {
    let b = ids::ctaid_x();
    let t = ids::thread_linear();
    let threads = ids::ntid_x();
    unsafe {
        if b < pairs {
            // Spread the producers' finish times a little so consumers really wait.
            if t == 0 {
                let until = time::global_timer_ns() + 2_000 * (b as u64 % 8);
                while time::global_timer_ns() < until {}
            }
            barrier::sync_threads();
            let mut i = t;
            while i < n {
                *data.add((b * n + i) as usize) = b.wrapping_mul(0x9e37_79b9) ^ i;
                i += threads;
            }
            if mode == 1 {
                sync::block_post_sys(flags.add(b as usize), 1);
            } else {
                sync::block_post_gpu(flags.add(b as usize), 1);
            }
        } else {
            let p = b - pairs;
            let site = WaitSite {
                stage: 1,
                tile: p,
                error,
                timeout_ns: 1_000_000_000,
            };
            let flag = flags.add(p as usize);
            let ok = if mode == 1 {
                block_flag_sys(flag, &site)
            } else {
                sync::block_wait_gpu(flag, 1, &site)
            };
            if !ok {
                return;
            }
            #[cfg(target_feature = "sm_90a")]
            if mode == 2 {
                fence::proxy_async_global();
            }
            let mut i = t;
            while i < n {
                *out.add((p * n + i) as usize) = *data.add((p * n + i) as usize);
                i += threads;
            }
        }
    }
    if mode == 3 {
        fence::sc_gpu();
        fence::acq_rel_sys();
    }
}

/// Block-wide system-scope wait (thread 0 spins with `ld.acquire.sys`, then `bar.sync`).
unsafe fn block_flag_sys(flag: *const u32, site: &WaitSite) -> bool {
    let shared = selftest_static();
    if ids::thread_linear() == 0 {
        let ok = unsafe { sync::thread_wait_sys(flag, 1, site) };
        unsafe { shared.add(1000).write_volatile(ok as u32) };
    }
    barrier::sync_threads();
    unsafe { shared.add(1000).read_volatile() != 0 }
}

/// Dynamic and static shared memory: `words` u32 in the dynamic area (launch with
/// `4 * words` bytes) and 1024 in the static one, written, synchronized, read back reversed.
/// out[0..words]: dynamic reversed; out[words..words+1024]: static reversed.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_smem(out: *mut u32, words: u32) {
    let dynamic = smem::dynamic_ptr() as *mut u32;
    let stat = selftest_static();
    let t = ids::thread_linear();
    let threads = ids::ntid_x();
    unsafe {
        let mut i = t;
        while i < words {
            *dynamic.add(i as usize) = i ^ 0x5a5a_5a5a;
            i += threads;
        }
        let mut i = t;
        while i < 1024 {
            *stat.add(i as usize) = i.wrapping_mul(2_654_435_761);
            i += threads;
        }
        // The 32-bit shared address of the dynamic area must agree with the generic one.
        if t == 0 && smem::to_shared_addr(dynamic) != smem::dynamic_addr() {
            *dynamic = 0xdead_beef;
        }
        barrier::sync_threads();
        let mut i = t;
        while i < words {
            *out.add(i as usize) = *dynamic.add((words - 1 - i) as usize);
            i += threads;
        }
        let mut i = t;
        while i < 1024 {
            *out.add((words + i) as usize) = *stat.add((1023 - i) as usize);
            i += threads;
        }
    }
}

/// `cp.async`: thread t copies 16-byte chunk t of `src` into the dynamic area; threads with
/// t % 5 == 4 copy only t % 17 bytes (the rest zero-filled). Two commit groups (first half,
/// second half), `wait_group 1` then `wait_all`. The dynamic area is written to `out`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_cp_async(src: *const u8, out: *mut u8) {
    let t = ids::thread_linear();
    let threads = ids::ntid_x();
    let base = smem::dynamic_addr();
    let bytes = if t % 5 == 4 { t % 17 } else { 16 };
    let half = threads / 2;
    unsafe {
        if t < half {
            copy::cp_async_16(base + 16 * t, src.add(16 * t as usize), bytes);
        }
        copy::commit_group();
        if t >= half {
            copy::cp_async_16(base + 16 * t, src.add(16 * t as usize), bytes);
        }
        copy::commit_group();
        copy::wait_group::<1>();
        copy::wait_all();
        barrier::sync_threads();
        let d = smem::dynamic_ptr();
        for j in 0..16usize {
            *out.add(16 * t as usize + j) = *d.add(16 * t as usize + j);
        }
    }
}

/// One warp. `src` is a 16x16 b16 matrix, row-major. out[0..128]: `ldmatrix.x4` registers
/// (lane*4 + j) with matrix j = rows (j%2)*8.., cols (j/2)*8..; out[128..256]: the same with
/// `.trans`; out[256..320]: `ldmatrix.x2` of matrices 0 and 1.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_ldmatrix(src: *const u16, out: *mut u32) {
    let lane = ids::lane_id();
    let s = smem::dynamic_ptr() as *mut u16;
    unsafe {
        for k in 0..8u32 {
            let i = (lane * 8 + k) as usize;
            *s.add(i) = *src.add(i);
        }
        barrier::sync_warp();
        barrier::sync_threads();
        let m = lane / 8;
        let r = lane % 8;
        let row_addr = |m: u32, r: u32| smem::dynamic_addr() + ((m % 2) * 8 + r) * 32 + (m / 2) * 16;
        let a = mma::ldmatrix_x4(row_addr(m, r));
        let at = mma::ldmatrix_x4_trans(row_addr(m, r));
        let a2 = mma::ldmatrix_x2(row_addr(m % 2, r));
        for j in 0..4usize {
            *out.add(lane as usize * 4 + j) = a[j];
            *out.add(128 + lane as usize * 4 + j) = at[j];
        }
        for (j, v) in a2.iter().enumerate() {
            *out.add(256 + lane as usize * 2 + j) = *v;
        }
    }
}

/// One warp: D = A x B + C with `mma.sync.m16n8k16` (`kind` 0: bf16, 1: f16). A is 16x16
/// row-major, B 16x8 row-major (k x n), C and D 16x8 f32 row-major. Fragments are gathered
/// from global memory per the PTX ISA fragment layout.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma(a: *const u16, b: *const u16, c: *const f32, d: *mut f32, kind: u32) {
    let lane = ids::lane_id();
    let group = lane / 4;
    let tig = lane % 4;
    let pack = |lo: u16, hi: u16| (lo as u32) | ((hi as u32) << 16);
    unsafe {
        let at = |r: u32, col: u32| *a.add((r * 16 + col) as usize);
        let bt = |k: u32, n: u32| *b.add((k * 8 + n) as usize);
        let fa = [
            pack(at(group, tig * 2), at(group, tig * 2 + 1)),
            pack(at(group + 8, tig * 2), at(group + 8, tig * 2 + 1)),
            pack(at(group, tig * 2 + 8), at(group, tig * 2 + 9)),
            pack(at(group + 8, tig * 2 + 8), at(group + 8, tig * 2 + 9)),
        ];
        let fb = [
            pack(bt(tig * 2, group), bt(tig * 2 + 1, group)),
            pack(bt(tig * 2 + 8, group), bt(tig * 2 + 9, group)),
        ];
        let ct = |r: u32, col: u32| *c.add((r * 8 + col) as usize);
        let fc = [
            ct(group, tig * 2),
            ct(group, tig * 2 + 1),
            ct(group + 8, tig * 2),
            ct(group + 8, tig * 2 + 1),
        ];
        let r = if kind == 0 {
            mma::mma_bf16_m16n8k16(fa, fb, fc)
        } else {
            mma::mma_f16_m16n8k16(fa, fb, fc)
        };
        *d.add((group * 8 + tig * 2) as usize) = r[0];
        *d.add((group * 8 + tig * 2 + 1) as usize) = r[1];
        *d.add(((group + 8) * 8 + tig * 2) as usize) = r[2];
        *d.add(((group + 8) * 8 + tig * 2 + 1) as usize) = r[3];
    }
}
