//! The `cusync` command's argument checks and its GPU-free subcommands, run as a user runs
//! them (the built binary). Bad arguments must be refused with a message that names them
//! before any device is opened, so these pass with or without a GPU.

use std::process::Command;

/// Runs `cusync args...`; returns (exit success, stdout, stderr).
fn cusync(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cusync"))
        .args(args)
        .env("CUSYNC_CACHE_DIR", std::env::temp_dir().join("cusync-cli-test-cache"))
        .output()
        .expect("the cusync binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_mlp_arguments_are_refused_before_any_device() {
    for (args, words) in [
        (&["run", "mlp", "--policy", "bogus"][..], "unknown policy `bogus`"),
        (&["run", "mlp", "--trial"][..], "--trial needs --policy auto"),
        (
            &["run", "mlp", "--order", "diagonal"][..],
            "unknown tile order `diagonal`",
        ),
        (&["run", "mlp", "--model", "gpt9"][..], "gpt9"),
        (&["run", "mlp", "--kernel", "wg64x64"][..], "wg64x64"),
        (
            &["run", "mlp", "--trace", "/tmp/x", "--pipeline-depth", "4"][..],
            "--pipeline-depth is not taken by the traced run",
        ),
    ] {
        let (ok, _, err) = cusync(args);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(words), "{args:?}: {err}");
        assert!(!err.contains("CUDA"), "{args:?} reached the device: {err}");
    }
}

#[test]
fn bad_gemm_arguments_are_refused_before_any_device() {
    let (ok, _, err) = cusync(&["run", "gemm", "--depth-sweep", "--pipeline-depth", "4"]);
    assert!(!ok && err.contains("--depth-sweep times every pipeline depth"), "{err}");
    let (ok, _, err) = cusync(&["run", "gemm", "--kernel", "wg999x1"]);
    assert!(!ok && err.contains("wg999x1"), "{err}");
}

#[test]
fn simulate_and_the_ptx_fingerprint_need_no_gpu() {
    let (ok, out, err) = cusync(&["simulate"]);
    assert!(ok, "{err}");
    assert!(out.contains("wave model") && out.contains("GPT-3"), "{out}");
    let (ok, out, err) = cusync(&["ptx-fingerprint"]);
    assert!(ok, "{err}");
    let hex = out.trim();
    assert!(hex.len() == 16 && hex.chars().all(|c| c.is_ascii_hexdigit()), "{out}");
}

#[test]
fn simulate_stacks_takes_its_model_parameters_and_refuses_bad_ones() {
    let (ok, out, err) = cusync(&["simulate", "--stacks", "--blocks", "64", "--post-latency", "0.1"]);
    assert!(ok, "{err}");
    assert!(out.contains("(64 blocks") && out.contains("visible 0.1 T"), "{out}");
    assert!(!out.contains("GPT-3") && out.contains("micro-batching"), "{out}");
    for (args, words) in [
        (
            &["simulate", "--stacks", "--blocks", "0"][..],
            "--blocks must be at least 1",
        ),
        (&["simulate", "--stacks", "--post-latency", "-1"][..], "--post-latency"),
        (&["simulate", "--stacks", "--post-latency", "inf"][..], "--post-latency"),
        (&["simulate", "--blocks", "64"][..], "--stacks"),
    ] {
        let (ok, _, err) = cusync(args);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(words), "{args:?}: {err}");
    }
}
