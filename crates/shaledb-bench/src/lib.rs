//! ShaleDB's benchmark harness: the YCSB core workloads and db_bench's workloads, run side by
//! side against peer engines in one process, in alternating rounds, with reports and charts.

pub mod engine;
pub mod engines;

pub mod charts;
pub mod dbbench;
pub mod measure;
pub mod report;
pub mod results;
pub mod runner;
pub mod suite;
pub mod values;
pub mod ycsb;
