//! What users get today, run on the same device for comparison: vendor libraries through
//! cudarc (dynamically loaded; a missing library is an error, never a panic).

pub mod cublas;
