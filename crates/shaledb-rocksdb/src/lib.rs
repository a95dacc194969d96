//! RocksDB's C API over ShaleDB: the functions `rocksdb/c.h` of RocksDB 10.4.2 declares
//! (`include/rocksdb/c.h`, unchanged), so a program written for RocksDB's C API, or for a
//! binding built on it such as the `rocksdb` Rust crate, runs on ShaleDB by relinking.
//!
//! A RocksDB database is a ShaleDB KVDB in the same directory; each column family is a KVS of
//! the same name ("default" included). What maps onto ShaleDB works as RocksDB documents it;
//! what ShaleDB cannot honour (merge operators, custom comparators, compaction filters, SST
//! ingestion, ...) fails with a "Not implemented: ..." status naming the feature; knobs with
//! no ShaleDB meaning are accepted, recorded and listed in the database's `LOG`.
//! docs/ROCKSDB-API.md has the coverage table.
//!
//! Every exported function catches panics (none may unwind into C) and reports errors through
//! `char** errptr` as RocksDB's `Status::ToString()` would word them.
#![allow(non_camel_case_types)]

mod args;
mod backup_engine;
mod batch;
mod batch_slices;
mod checkpoint;
mod db;
mod events;
mod iterator;
mod lock_table;
mod maintenance;
mod open_variants;
mod optimistic;
mod option_setters;
mod option_strings;
mod options;
mod plugins;
mod prepared;
mod properties;
mod read_write_options;
mod reads;
mod resources;
mod settings;
mod single_writes;
mod snapshot;
mod sst_files;
mod statistics;
mod status;
mod table_options;
mod timestamps;
mod transaction;
mod transaction_db;
mod transaction_options;
mod wal;
mod write_batch_with_index;
mod write_set;
