/work/main/device/target/debug/deps/cusync_shared-a2ee1b234d654dde.d: /work/main/shared/src/lib.rs /work/main/shared/src/dynamic_k.rs /work/main/shared/src/gemm.rs /work/main/shared/src/gemm_sm90.rs /work/main/shared/src/lanes.rs /work/main/shared/src/layout.rs /work/main/shared/src/order.rs /work/main/shared/src/persistent.rs /work/main/shared/src/placement.rs /work/main/shared/src/policy.rs /work/main/shared/src/policy/builtin.rs /work/main/shared/src/policy/dependency.rs /work/main/shared/src/policy/schedule.rs /work/main/shared/src/policy/soundness.rs /work/main/shared/src/protocol.rs /work/main/shared/src/protocol/counter.rs /work/main/shared/src/protocol/error.rs /work/main/shared/src/protocol/memory.rs /work/main/shared/src/protocol/queue.rs /work/main/shared/src/protocol/scoreboard.rs /work/main/shared/src/protocol/wait.rs /work/main/shared/src/protocol/window.rs /work/main/shared/src/protocol/atomic_words.rs /work/main/shared/src/read_probe.rs /work/main/shared/src/skinny.rs /work/main/shared/src/stream_k.rs /work/main/shared/src/tile.rs /work/main/shared/src/tma_probe.rs

/work/main/device/target/debug/deps/libcusync_shared-a2ee1b234d654dde.rmeta: /work/main/shared/src/lib.rs /work/main/shared/src/dynamic_k.rs /work/main/shared/src/gemm.rs /work/main/shared/src/gemm_sm90.rs /work/main/shared/src/lanes.rs /work/main/shared/src/layout.rs /work/main/shared/src/order.rs /work/main/shared/src/persistent.rs /work/main/shared/src/placement.rs /work/main/shared/src/policy.rs /work/main/shared/src/policy/builtin.rs /work/main/shared/src/policy/dependency.rs /work/main/shared/src/policy/schedule.rs /work/main/shared/src/policy/soundness.rs /work/main/shared/src/protocol.rs /work/main/shared/src/protocol/counter.rs /work/main/shared/src/protocol/error.rs /work/main/shared/src/protocol/memory.rs /work/main/shared/src/protocol/queue.rs /work/main/shared/src/protocol/scoreboard.rs /work/main/shared/src/protocol/wait.rs /work/main/shared/src/protocol/window.rs /work/main/shared/src/protocol/atomic_words.rs /work/main/shared/src/read_probe.rs /work/main/shared/src/skinny.rs /work/main/shared/src/stream_k.rs /work/main/shared/src/tile.rs /work/main/shared/src/tma_probe.rs

/work/main/shared/src/lib.rs:
/work/main/shared/src/dynamic_k.rs:
/work/main/shared/src/gemm.rs:
/work/main/shared/src/gemm_sm90.rs:
/work/main/shared/src/lanes.rs:
/work/main/shared/src/layout.rs:
/work/main/shared/src/order.rs:
/work/main/shared/src/persistent.rs:
/work/main/shared/src/placement.rs:
/work/main/shared/src/policy.rs:
/work/main/shared/src/policy/builtin.rs:
/work/main/shared/src/policy/dependency.rs:
/work/main/shared/src/policy/schedule.rs:
/work/main/shared/src/policy/soundness.rs:
/work/main/shared/src/protocol.rs:
/work/main/shared/src/protocol/counter.rs:
/work/main/shared/src/protocol/error.rs:
/work/main/shared/src/protocol/memory.rs:
/work/main/shared/src/protocol/queue.rs:
/work/main/shared/src/protocol/scoreboard.rs:
/work/main/shared/src/protocol/wait.rs:
/work/main/shared/src/protocol/window.rs:
/work/main/shared/src/protocol/atomic_words.rs:
/work/main/shared/src/read_probe.rs:
/work/main/shared/src/skinny.rs:
/work/main/shared/src/stream_k.rs:
/work/main/shared/src/tile.rs:
/work/main/shared/src/tma_probe.rs:
