//! The PTX embedded at build time (host/build.rs) and the names of its entry points.

/// The PTX module compiled from `device/` for [`PTX_ARCH`].
pub static PTX: &str = include_str!(env!("CUSYNC_PTX_PATH"));

/// The target the embedded PTX was built for (`CUSYNC_ARCH` at build time).
pub const PTX_ARCH: &str = env!("CUSYNC_PTX_ARCH");

/// Environment variable naming a PTX file to load instead of the embedded [`PTX`]: for A/B
/// experiments on a GPU machine with a modified module (e.g. another `setmaxnreg` split made
/// with `sed`) without rebuilding. It must be the same build's PTX (same entry points and
/// parameter layouts); every context says on stderr that it loaded it.
pub const PTX_OVERRIDE_ENV: &str = "CUSYNC_PTX_FILE";

/// The PTX every context loads: [`PTX`], or the file [`PTX_OVERRIDE_ENV`] names (an error
/// that names the file when it cannot be read). `Policy::Auto`'s trial cache still keys on the
/// embedded PTX.
pub fn module_ptx() -> crate::Result<String> {
    module_ptx_from(std::env::var_os(PTX_OVERRIDE_ENV))
}

/// [`module_ptx`] for an override path (`None`: the embedded PTX).
fn module_ptx_from(path: Option<std::ffi::OsString>) -> crate::Result<String> {
    let Some(path) = path else {
        return Ok(PTX.to_string());
    };
    let path = std::path::PathBuf::from(path);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        crate::Error::InvalidArgument(format!(
            "{PTX_OVERRIDE_ENV}={}: cannot read the PTX file: {e}",
            path.display()
        ))
    })?;
    eprintln!(
        "cusync: loading PTX from {} ({PTX_OVERRIDE_ENV}), not the embedded module",
        path.display()
    );
    Ok(text)
}

/// Environment variable naming a cubin that `ptxas` compiled from the PTX this process would
/// load ([`module_ptx`]): the context loads it instead of having the driver JIT-compile the
/// whole module (minutes on a fresh machine). A file `<cubin>.fnv` beside it must hold
/// [`ptx_fingerprint`] of that PTX in hex (`cusync ptx-fingerprint` prints it), so a stale cubin
/// is refused instead of silently running other code.
pub const CUBIN_ENV: &str = "CUSYNC_CUBIN_FILE";

/// What a context hands the driver: PTX text, or a cubin compiled from the same PTX.
pub enum ModuleImage {
    /// PTX, JIT-compiled by the driver at load.
    Ptx(String),
    /// A cubin for this GPU's architecture, loaded as is.
    Cubin(Vec<u8>),
}

/// FNV-1a (64-bit) of a PTX text: the fingerprint a cubin's `.fnv` file must match.
pub fn ptx_fingerprint(ptx: &str) -> u64 {
    ptx.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl std::fmt::Debug for ModuleImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ptx(t) => write!(f, "Ptx({} bytes)", t.len()),
            Self::Cubin(b) => write!(f, "Cubin({} bytes)", b.len()),
        }
    }
}

/// The module every context loads: the cubin [`CUBIN_ENV`] names when its fingerprint matches
/// [`module_ptx`], else that PTX; a named cubin that cannot be read, or whose fingerprint is
/// missing or stale, is an error that says which.
pub fn module_image() -> crate::Result<ModuleImage> {
    let ptx = module_ptx()?;
    module_image_from(ptx, std::env::var_os(CUBIN_ENV))
}

fn module_image_from(ptx: String, cubin: Option<std::ffi::OsString>) -> crate::Result<ModuleImage> {
    let Some(path) = cubin.filter(|p| !p.is_empty()) else {
        return Ok(ModuleImage::Ptx(ptx));
    };
    let path = std::path::PathBuf::from(path);
    let bad = |what: String| crate::Error::InvalidArgument(format!("{CUBIN_ENV}={}: {what}", path.display()));
    let mut fnv_path = path.clone().into_os_string();
    fnv_path.push(".fnv");
    let recorded =
        std::fs::read_to_string(&fnv_path).map_err(|e| bad(format!("cannot read its fingerprint file ({e})")))?;
    let expected = format!("{:016x}", ptx_fingerprint(&ptx));
    if recorded.trim() != expected {
        return Err(bad(format!(
            "compiled from another PTX (fingerprint {} recorded, {expected} for the PTX this \
             process loads): rebuild it with ptxas, or unset {CUBIN_ENV}",
            recorded.trim()
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| bad(format!("cannot read the cubin ({e})")))?;
    Ok(ModuleImage::Cubin(bytes))
}

/// Entry points of the intrinsic self-test kernels (device/src/kernels/selftest.rs).
pub const SELFTEST_KERNELS: &[&str] = &[
    "selftest_ids",
    "selftest_time",
    "selftest_barriers",
    "selftest_atomics",
    "selftest_message_passing",
    "selftest_smem",
    "selftest_cp_async",
    "selftest_ldmatrix",
    "selftest_mma",
];

/// Entry points of the stream-mode protocol test (device/src/kernels/protocol_test.rs).
pub const PROTOCOL_TEST_KERNELS: &[&str] = &["protocol_producer", "protocol_consumer"];

/// Stream-mode kernels: the wait kernel and the scalar GeMM stage used by protocol tests
/// (device/src/kernels/stream_mode.rs).
pub const STREAM_MODE_KERNELS: &[&str] = &[
    "stream_wait_kernel",
    "scalar_gemm_nosync",
    "scalar_gemm_stream",
    "gemm_bf16_128x128_stream",
    "gemm_bf16_256x128_stream",
    "gemm_bf16_64x64_stream",
    "gemm_skinny_bf16_m16_stream",
];

/// Microbenchmark kernels of the protocol's primitives (device/src/kernels/microbench.rs).
pub const MICROBENCH_KERNELS: &[&str] = &[
    "bench_pingpong_in_kernel",
    "bench_pingpong_kernel",
    "bench_fence",
    "bench_tile_counter",
    "bench_empty",
    "hold_stream",
    "bench_queue",
    "bench_scoreboard",
    "bench_read_runs_d8",
    "bench_read_runs_d16",
    "bench_read_async_g4",
    "bench_read_async_g6",
];

/// Tensor-core GeMM kernels (device/src/kernels/gemm): input type x tile configuration, plus
/// the grid-stride test kernel (several tiles per block).
pub const GEMM_KERNELS: &[&str] = &[
    "gemm_bf16_256x128",
    "gemm_f16_256x128",
    "gemm_bf16_128x128",
    "gemm_bf16_64x64",
    "gemm_f16_128x128",
    "gemm_f16_64x64",
    "gemm_test_grid_stride_bf16_64x64",
    "gemm_skinny_bf16_m16",
    "gemm_skinny_bf16_m16_w128",
    "gemm_skinny_bf16_m32",
    "gemm_skinny_bf16_m64",
    "gemm_skinny_f16_m16",
    "gemm_skinny_f16_m16_w128",
    "gemm_skinny_f16_m32",
    "gemm_skinny_f16_m64",
];

/// GeMM path 2 (sm_90a only: TMA + wgmma, warp-specialized, persistent;
/// device/src/kernels/gemm/sm90.rs): input type x tile.
pub const GEMM_SM90_KERNELS: &[&str] = &[
    "gemm_sm90_bf16_128x256",
    "gemm_sm90_f16_128x256",
    "gemm_sm90_bf16_128x128",
    "gemm_sm90_f16_128x128",
    "gemm_sm90_bf16_128x192",
    "gemm_sm90_f16_128x192",
    "gemm_sm90_bf16_128x64",
    "gemm_sm90_f16_128x64",
    "gemm_sm90_bf16_64x96",
    "gemm_sm90_f16_64x96",
    "gemm_sm90_bf16_128x16",
    "gemm_sm90_f16_128x16",
    "gemm_sm90_bf16_128x256_c2",
    "gemm_sm90_f16_128x256_c2",
];

/// Persistent-mode kernels (device/src/kernels/persistent.rs): the megakernel per worker
/// family, its no-protocol twin, and the per-launch queue prefill.
pub const PERSISTENT_KERNELS: &[&str] = &[
    "persistent_f32",
    "persistent_f32_noprotocol",
    "persistent_bf16_128x128",
    "persistent_bf16_128x128_noprotocol",
    "persistent_prefill",
];

/// The path-2 persistent megakernels (sm_90a only; device/src/persistent/sm90.rs): per tile
/// shape, with the CTA-pipelining protocol and its no-protocol twin.
pub const PERSISTENT_SM90_KERNELS: &[&str] = &[
    "persistent_sm90_bf16_128x256",
    "persistent_sm90_bf16_128x256_noprotocol",
    "persistent_sm90_bf16_128x128",
    "persistent_sm90_bf16_128x128_noprotocol",
];

/// The TMA streaming probe (sm_90a only; device/src/kernels/tma_probe.rs).
pub const PROBE_SM90_KERNELS: &[&str] = &["bench_tma_stream"];

/// Every entry point the host expects in [`PTX`].
pub fn all_entry_points() -> impl Iterator<Item = &'static str> {
    SELFTEST_KERNELS
        .iter()
        .chain(PROTOCOL_TEST_KERNELS)
        .chain(STREAM_MODE_KERNELS)
        .chain(MICROBENCH_KERNELS)
        .chain(GEMM_KERNELS)
        .chain(if PTX_ARCH == "sm_90a" { GEMM_SM90_KERNELS } else { &[] })
        .chain(PERSISTENT_KERNELS)
        .chain(if PTX_ARCH == "sm_90a" {
            PERSISTENT_SM90_KERNELS
        } else {
            &[]
        })
        .chain(if PTX_ARCH == "sm_90a" { PROBE_SM90_KERNELS } else { &[] })
        .copied()
}

/// The compute capability (major, minor) the embedded PTX needs at least, and whether it needs
/// exactly that family (`sm_90a` code runs only on sm_90 devices).
pub fn required_capability() -> ((i32, i32), bool) {
    match PTX_ARCH {
        "sm_90a" => ((9, 0), true),
        _ => ((8, 0), false),
    }
}

/// The `.entry` names declared in a PTX text.
pub fn entry_points_in(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .filter_map(|rest| rest.split('(').next())
        .map(str::trim)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ptx_override_reads_the_named_file_or_says_why_not() {
        assert_eq!(module_ptx_from(None).unwrap(), PTX);
        let path = std::env::temp_dir().join(format!("cusync-ptx-override-{}.ptx", std::process::id()));
        std::fs::write(&path, "// a modified module\n").unwrap();
        assert_eq!(
            module_ptx_from(Some(path.clone().into())).unwrap(),
            "// a modified module\n"
        );
        std::fs::remove_file(&path).unwrap();
        let e = module_ptx_from(Some(path.clone().into())).unwrap_err().to_string();
        assert!(
            e.contains(PTX_OVERRIDE_ENV) && e.contains(&path.display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn a_cubin_loads_only_with_the_fingerprint_of_the_ptx_it_replaces() {
        let ptx = "// module\n".to_string();
        assert!(matches!(module_image_from(ptx.clone(), None).unwrap(), ModuleImage::Ptx(t) if t == ptx));
        // An empty value (`CUSYNC_CUBIN_FILE= cmd`) means unset.
        assert!(matches!(
            module_image_from(ptx.clone(), Some("".into())).unwrap(),
            ModuleImage::Ptx(_)
        ));
        let dir = std::env::temp_dir();
        let cubin = dir.join(format!("cusync-cubin-{}.cubin", std::process::id()));
        let fnv = dir.join(format!("cusync-cubin-{}.cubin.fnv", std::process::id()));
        std::fs::write(&cubin, b"\x7fELF cubin").unwrap();
        let e = module_image_from(ptx.clone(), Some(cubin.clone().into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains(CUBIN_ENV) && e.contains("fingerprint file"), "{e}");
        std::fs::write(&fnv, "0123456789abcdef\n").unwrap();
        let e = module_image_from(ptx.clone(), Some(cubin.clone().into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("another PTX") && e.contains("0123456789abcdef"), "{e}");
        std::fs::write(&fnv, format!("{:016x}\n", ptx_fingerprint(&ptx))).unwrap();
        match module_image_from(ptx, Some(cubin.clone().into())).unwrap() {
            ModuleImage::Cubin(b) => assert_eq!(b, b"\x7fELF cubin"),
            ModuleImage::Ptx(_) => panic!("the cubin was not taken"),
        }
        // FNV-1a 64 of "a" (the published test vector).
        assert_eq!(ptx_fingerprint("a"), 0xaf63_dc4c_8601_ec8c);
        std::fs::remove_file(&cubin).unwrap();
        std::fs::remove_file(&fnv).unwrap();
    }

    #[test]
    fn embedded_ptx_declares_every_entry_point() {
        let entries = entry_points_in(PTX);
        for name in all_entry_points() {
            assert!(
                entries.contains(&name),
                "{name} missing from the embedded PTX ({PTX_ARCH})"
            );
        }
    }

    #[test]
    fn every_launch_bound_names_a_known_sm90_entry_point() {
        for (name, threads, blocks) in cusync_shared::gemm_sm90::LAUNCH_BOUNDS {
            assert!(
                GEMM_SM90_KERNELS
                    .iter()
                    .chain(PERSISTENT_SM90_KERNELS)
                    .any(|k| k == name)
                    || name.ends_with("_stream"),
                "{name} has launch bounds but is not an sm_90a entry point"
            );
            assert_eq!((*threads, *blocks), (cusync_shared::gemm_sm90::WG_THREADS, 1));
        }
        for k in PERSISTENT_SM90_KERNELS {
            assert!(
                cusync_shared::gemm_sm90::LAUNCH_BOUNDS.iter().any(|(n, ..)| n == k),
                "{k} needs launch bounds for setmaxnreg"
            );
            if PTX_ARCH == "sm_90a" {
                let at = PTX
                    .find(&format!(".visible .entry {k}("))
                    .unwrap_or_else(|| panic!("{k} missing from the PTX"));
                let head = &PTX[at..];
                let head = &head[..head.find("\n{").unwrap_or(head.len())];
                assert!(head.contains(".maxntid 384, 1, 1"), "{k}: no .maxntid in {head}");
            }
        }
    }

    #[test]
    fn embedded_ptx_targets_the_build_arch() {
        assert!(
            PTX.contains(&format!(".target {PTX_ARCH}")),
            "PTX is not for {PTX_ARCH}"
        );
    }
}
