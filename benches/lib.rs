//! Shared helpers for cusync benchmarks.
