//! Shared helpers for cusync integration tests.
