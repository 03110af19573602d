//! Compiles `device/` to PTX with rustc's NVPTX backend and embeds it in the `cusync` library.
//!
//! Recipe (DESIGN.md, "Device code: Rust to PTX"):
//! `cargo rustc -p cusync-device --release --target nvptx64-nvidia-cuda -Zbuild-std=core
//!  -- --emit=asm -C target-cpu=<arch> -C linker=true`, with fat LTO so every piece of `core`
//! used lands in one PTX module. The nested cargo gets its own target directory (so it does not
//! wait on the outer cargo's lock) and an environment stripped of the variables cargo sets for
//! build scripts, so host flags do not leak into the device build.
//!
//! `CUSYNC_ARCH` selects the target: `sm_90a` (default) or `sm_80` (Hopper-only code is behind
//! `cfg(target_feature = "sm_90a")` in device/). The build reruns only when device/, shared/ or
//! `CUSYNC_ARCH` change.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const TOOLCHAIN_HINT: &str = "install the pinned toolchain with: \
rustup toolchain install nightly-2026-05-20 --component rust-src --component llvm-tools \
(rust-toolchain.toml at the workspace root names it; core is built for nvptx64 from rust-src)";

const SUPPORTED_ARCHS: &[&str] = &["sm_90a", "sm_80"];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .expect("host/ lives in the workspace root")
        .to_path_buf();
    let device_dir = root.join("device");
    let shared_dir = root.join("shared");
    println!("cargo:rerun-if-changed={}", device_dir.join("src").display());
    println!("cargo:rerun-if-changed={}", device_dir.join("Cargo.toml").display());
    println!("cargo:rerun-if-changed={}", shared_dir.join("src").display());
    println!("cargo:rerun-if-changed={}", shared_dir.join("Cargo.toml").display());
    println!("cargo:rerun-if-env-changed=CUSYNC_ARCH");

    let arch = env::var("CUSYNC_ARCH").unwrap_or_else(|_| "sm_90a".to_string());
    if !SUPPORTED_ARCHS.contains(&arch.as_str()) {
        fail(&format!(
            "CUSYNC_ARCH={arch} is not supported; use one of {SUPPORTED_ARCHS:?}"
        ));
    }

    check_rust_src();

    let target_root = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root.join(p) })
        .unwrap_or_else(|| root.join("target"));
    let device_target = target_root.join("cusync-device").join(&arch);

    let ptx = build_device(&device_dir, &device_target, &arch);
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let embedded = out_dir.join("cusync_device.ptx");
    let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| fail(&format!("reading {}: {e}", ptx.display())));
    let text = add_launch_bounds(
        &text,
        cusync_shared::gemm_sm90::LAUNCH_BOUNDS,
        cusync_shared::gemm_sm90::CLUSTER_ENTRIES,
    );
    std::fs::write(&embedded, &text).unwrap_or_else(|e| fail(&format!("writing {}: {e}", embedded.display())));
    let ptx = embedded.clone();
    // A stable copy for people and for scripts/gpu-check (ptxas, cuobjdump on the GPU machine).
    let _ = std::fs::copy(&ptx, target_root.join(format!("cusync_device.{arch}.ptx")));
    println!("cargo:rustc-env=CUSYNC_PTX_PATH={}", embedded.display());
    println!("cargo:rustc-env=CUSYNC_PTX_ARCH={arch}");
}

/// Fails the build unless the active toolchain has the rust-src component (-Zbuild-std needs it).
fn check_rust_src() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(&rustc).args(["--print", "sysroot"]).output();
    let sysroot = match out {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        _ => fail(&format!("cannot run `{rustc} --print sysroot`; {TOOLCHAIN_HINT}")),
    };
    let core_src = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
    if !core_src.exists() {
        fail(&format!(
            "the rust-src component is missing from {} (device code is built with -Zbuild-std=core); {TOOLCHAIN_HINT}",
            sysroot.display()
        ));
    }
}

/// Runs the nested cargo and returns the path of the PTX it wrote.
fn build_device(device_dir: &Path, target_dir: &Path, arch: &str) -> PathBuf {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(device_dir)
        .args([
            "rustc",
            "--release",
            "--target",
            "nvptx64-nvidia-cuda",
            "-Zbuild-std=core",
            "--target-dir",
        ])
        .arg(target_dir)
        .args([
            "--",
            "--emit=asm",
            "-C",
            &format!("target-cpu={arch}"),
            "-C",
            "linker=true",
        ]);
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy().to_string();
        let strip = key == "RUSTFLAGS"
            || key == "RUSTDOCFLAGS"
            || key == "RUSTC_WRAPPER"
            || key == "RUSTC_WORKSPACE_WRAPPER"
            || key == "TARGET"
            || key == "HOST"
            || key == "OUT_DIR"
            || key == "OPT_LEVEL"
            || key == "PROFILE"
            || key == "DEBUG"
            || key == "NUM_JOBS"
            || (key.starts_with("CARGO_") && key != "CARGO_HOME");
        if strip {
            cmd.env_remove(&key);
        }
    }
    let status = cmd.status().unwrap_or_else(|e| {
        fail(&format!(
            "cannot start cargo for the device build: {e}; {TOOLCHAIN_HINT}"
        ))
    });
    if !status.success() {
        fail(&format!(
            "the device build (device/ -> PTX for {arch}) failed; see the errors above. \
             If they mention a missing target or `-Zbuild-std`, {TOOLCHAIN_HINT}"
        ));
    }
    let ptx = target_dir.join("nvptx64-nvidia-cuda/release/deps/cusync_device.s");
    if !ptx.exists() {
        fail(&format!(
            "the device build succeeded but wrote no PTX at {}",
            ptx.display()
        ));
    }
    ptx
}

/// Writes `.maxntid THREADS, 1, 1` and `.minnctapersm BLOCKS` into each named entry's header
/// (between its parameter list and its body): rustc has no launch-bounds attribute, and
/// `setmaxnreg` needs the register cap they imply; and `.reqnctapercluster N, 1, 1` for the
/// entries of `clusters`. Entries absent from this PTX (the sm_90a kernels in an sm_80 build)
/// are skipped.
fn add_launch_bounds(ptx: &str, bounds: &[(&str, u32, u32)], clusters: &[(&str, u32)]) -> String {
    let mut out = String::with_capacity(ptx.len() + 64 * bounds.len());
    let mut pending: Option<(u32, u32, Option<u32>)> = None;
    for line in ptx.split_inclusive('\n') {
        if let Some(rest) = line.trim_start().strip_prefix(".visible .entry ") {
            let name = rest.split('(').next().unwrap_or("").trim();
            let cluster = clusters.iter().find(|(n, _)| *n == name).map(|&(_, c)| c);
            pending = bounds
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|&(_, t, b)| (t, b, cluster));
        }
        if let Some((threads, blocks, cluster)) = pending {
            if line.trim_start().starts_with('{') {
                out.push_str(&format!(".maxntid {threads}, 1, 1\n.minnctapersm {blocks}\n"));
                if let Some(c) = cluster {
                    out.push_str(&format!(".reqnctapercluster {c}, 1, 1\n"));
                }
                pending = None;
            }
        }
        out.push_str(line);
    }
    out
}

fn fail(msg: &str) -> ! {
    eprintln!("\ncusync build error: {msg}\n");
    panic!("cusync build error: {msg}");
}
