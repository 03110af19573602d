//! Shared helpers for cusync integration tests: the GPU test harness (which reports GPU tests
//! as *skipped*, never as passed, where no device is found), fresh random inputs, poisoned
//! outputs, and relative-error comparison against f64 references.

use cusync::{Context, Error};
use rand::{Rng, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// A GPU test: returns `Err(message)` on failure (panics count as failures too).
pub struct GpuTest {
    /// Test name, as printed and as filtered on the command line.
    pub name: &'static str,
    /// The test body.
    pub run: fn(&Context) -> Result<(), String>,
}

/// Outcome counts of a harness run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Tests that ran and passed.
    pub passed: usize,
    /// Tests that ran and failed.
    pub failed: usize,
    /// Tests that did not run (no GPU).
    pub skipped: usize,
}

/// Environment variable that turns "no GPU" into a failure (set by scripts/gpu-check).
pub const REQUIRE_GPU_VAR: &str = "CUSYNC_REQUIRE_GPU";

/// Runs `tests` on device 0 and prints one line per test and a closing
/// `N passed, N failed, N skipped` line. Without a GPU every test is reported skipped, loudly.
/// Command-line words that do not start with `-` filter tests by substring.
pub fn run_gpu_tests(suite: &str, tests: &[&GpuTest]) -> Summary {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&GpuTest> = tests
        .iter()
        .copied()
        .filter(|t| filters.is_empty() || filters.iter().any(|f| t.name.contains(f.as_str())))
        .collect();
    let mut summary = Summary::default();
    let require = std::env::var(REQUIRE_GPU_VAR).map(|v| v == "1").unwrap_or(false);
    println!("\nrunning {} GPU tests ({suite})", selected.len());
    let cx = match Context::new(0) {
        Ok(cx) => cx,
        Err(e @ (Error::NoDriver | Error::NoDevice(_))) => {
            for t in &selected {
                println!("test {} ... skipped: no CUDA device", t.name);
            }
            eprintln!(
                "\n*** {suite}: {} GPU tests SKIPPED: no CUDA device ({e}) ***",
                selected.len()
            );
            if require {
                eprintln!("*** {REQUIRE_GPU_VAR}=1: a missing GPU is a failure ***");
                summary.failed = selected.len();
            } else {
                summary.skipped = selected.len();
            }
            print_summary(suite, summary);
            return summary;
        }
        Err(e) => {
            eprintln!("*** {suite}: cannot open the GPU: {e} ***");
            summary.failed = selected.len();
            print_summary(suite, summary);
            return summary;
        }
    };
    let info = cx.info();
    println!(
        "device: {} (sm_{}{}, {} SMs), PTX {}",
        info.name,
        info.major,
        info.minor,
        info.sm_count,
        cusync::kernels::PTX_ARCH
    );
    for t in selected {
        let start = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| (t.run)(&cx)));
        let ms = start.elapsed().as_secs_f64() * 1e3;
        match outcome {
            Ok(Ok(())) => {
                summary.passed += 1;
                println!("test {} ... ok ({ms:.1} ms)", t.name);
            }
            Ok(Err(msg)) if msg.starts_with(SKIPPED) => {
                summary.skipped += 1;
                println!("test {} ... {msg} ({ms:.1} ms)", t.name);
            }
            Ok(Err(msg)) => {
                summary.failed += 1;
                println!("test {} ... FAILED ({ms:.1} ms)\n    {msg}", t.name);
            }
            Err(panic) => {
                summary.failed += 1;
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                println!("test {} ... FAILED (panicked) ({ms:.1} ms)\n    {msg}", t.name);
            }
        }
    }
    print_summary(suite, summary);
    summary
}

fn print_summary(suite: &str, s: Summary) {
    println!(
        "\n{suite}: {} passed, {} failed, {} skipped",
        s.passed, s.failed, s.skipped
    );
}

/// Exits the test binary with a failing status if any test failed.
pub fn exit_with(summary: Summary) -> ! {
    std::process::exit(if summary.failed > 0 { 1 } else { 0 })
}

/// A generator seeded from the clock (fresh inputs every run); the seed is printed so a
/// failure can be replayed with `CUSYNC_SEED`.
pub fn fresh_rng(test: &str) -> rand::rngs::StdRng {
    let seed = std::env::var("CUSYNC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    println!("    {test}: seed {seed}");
    rand::rngs::StdRng::seed_from_u64(seed)
}

/// `n` values uniform in [-1, 1).
pub fn random_f32(rng: &mut impl Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// The value written into outputs before a launch, so unwritten elements are caught.
pub const POISON_F32: f32 = f32::NAN;
/// Poison for `u32` outputs.
pub const POISON_U32: u32 = 0xDEAD_BEEF;

pub use cusync::verify::relative_error;

/// How a GPU test's error message starts when the test did not run for a reason other than a
/// missing GPU (e.g. a library that cannot be loaded): the harness counts it as *skipped*,
/// never as passed, and prints the reason. Build it with [`skip`].
pub const SKIPPED: &str = "skipped: ";

/// The `Err` of a GPU test that could not run: `return Err(skip("NCCL could not be loaded"))`.
pub fn skip(reason: impl std::fmt::Display) -> String {
    format!("{SKIPPED}{reason}")
}

/// Turns a condition into a test result with a message.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(msg())
    }
}

/// Maps any displayable error into a test failure message.
pub fn fail<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}
