//! GPU test suite (custom harness). Without a GPU every test prints `skipped: no CUDA device`
//! and counts as skipped; with `CUSYNC_REQUIRE_GPU=1` (scripts/gpu-check) that is a failure.
//! A new suite is one `mod` line and one entry in `SUITES`.

mod chain;
mod dag;
mod gemm;
mod intrinsics;
mod microbench;
mod mlp;
mod multigpu;
mod persistent;
mod probe;
mod protocol;
mod reliability;
mod stream_mode;
mod traces;

/// Every GPU test module's tests, in the order they run.
const SUITES: &[&[cusync_tests::GpuTest]] = &[
    intrinsics::TESTS,
    protocol::TESTS,
    stream_mode::TESTS,
    reliability::TESTS,
    mlp::TESTS,
    persistent::TESTS,
    gemm::TESTS,
    probe::TESTS,
    microbench::TESTS,
    traces::TESTS,
    multigpu::TESTS,
];

fn main() {
    let tests: Vec<&cusync_tests::GpuTest> = SUITES.iter().flat_map(|s| s.iter()).collect();
    let summary = cusync_tests::run_gpu_tests("gpu", &tests);
    cusync_tests::exit_with(summary)
}
