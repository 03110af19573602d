/work/main/device/target/debug/deps/cusync_device-d14c60e6d230e76d.d: src/lib.rs Cargo.toml

/work/main/device/target/debug/deps/libcusync_device-d14c60e6d230e76d.rmeta: src/lib.rs Cargo.toml

src/lib.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=
# env-dep:CLIPPY_CONF_DIR
