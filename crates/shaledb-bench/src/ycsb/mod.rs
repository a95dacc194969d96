//! The YCSB core workloads.

pub mod generator;
pub mod workload;
