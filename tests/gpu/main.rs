//! GPU test suite (custom harness). Without a GPU every test prints `skipped: no CUDA device`
//! and counts as skipped; with `CUSYNC_REQUIRE_GPU=1` (scripts/gpu-check) that is a failure.

mod intrinsics;
mod protocol;

fn main() {
    let tests: Vec<cusync_tests::GpuTest> = intrinsics::TESTS
        .iter()
        .chain(protocol::TESTS)
        .map(|t| cusync_tests::GpuTest {
            name: t.name,
            run: t.run,
        })
        .collect();
    let summary = cusync_tests::run_gpu_tests("gpu", &tests);
    cusync_tests::exit_with(summary)
}
