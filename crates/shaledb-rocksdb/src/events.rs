//! Event listeners (`rocksdb_eventlistener_*`) and the job descriptions RocksDB passes them.
//! ShaleDB has none of the events they listen for in RocksDB's sense (memtable flushes and
//! seals, SST compactions and subcompactions, file ingestion, write stalls on L0 files), so a
//! listener is accepted and kept until destroyed (its destructor runs then) but never called,
//! and no job description is ever made: their accessors answer for NULL.

use crate::args::set_out;
use crate::options::rocksdb_options_t;
use crate::plugins::rocksdb_compactionfilter_t;
use crate::status::quiet;
use libc::{c_char, c_void};
use std::sync::Arc;

/// A C callback pointer of any of c.h's listener types (never called).
type Callback = *const c_void;

/// The C state of a listener, released by its destructor when the last holder drops it.
struct ListenerState {
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
}

// SAFETY: the state pointer is only handed back to the program's destructor, once; c.h
// requires listener state to be usable from any thread, as RocksDB calls it from its own.
unsafe impl Send for ListenerState {}
unsafe impl Sync for ListenerState {}

impl Drop for ListenerState {
    fn drop(&mut self) {
        if let Some(destructor) = self.destructor {
            // SAFETY: c.h hands the destructor the state it was created with, once.
            unsafe { destructor(self.state) }
        }
    }
}

/// `rocksdb_eventlistener_t`.
pub struct rocksdb_eventlistener_t {
    state: Arc<ListenerState>,
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn rocksdb_eventlistener_create(
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    _on_flush_begin: Callback,
    _on_flush_completed: Callback,
    _on_compaction_begin: Callback,
    _on_compaction_completed: Callback,
    _on_subcompaction_begin: Callback,
    _on_subcompaction_completed: Callback,
    _on_external_file_ingested: Callback,
    _on_background_error: Callback,
    _on_stall_conditions_changed: Callback,
    _on_memtable_sealed: Callback,
) -> *mut rocksdb_eventlistener_t {
    crate::args::into_handle(rocksdb_eventlistener_t {
        state: Arc::new(ListenerState { state, destructor }),
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_eventlistener_destroy(listener: *mut rocksdb_eventlistener_t) {
    quiet((), || crate::args::drop_handle(listener))
}

/// Adds the listener to the options, which keep it (and its state) alive while they live.
#[no_mangle]
pub extern "C" fn rocksdb_options_add_eventlistener(
    options: *mut rocksdb_options_t,
    listener: *mut rocksdb_eventlistener_t,
) {
    quiet((), || {
        if let (Ok(options), Ok(listener)) = (
            crate::args::handle_mut(options, "options"),
            crate::args::handle(listener, "event listener"),
        ) {
            options.listeners.push(listener.state.clone());
        }
    })
}

/// A handle kept by options for a listener.
pub(crate) type Listener = Arc<dyn Send + Sync>;

/// `rocksdb_status_ptr_t`: only ever passed to a background-error callback, never made.
pub struct rocksdb_status_ptr_t {
    _never: (),
}

#[no_mangle]
pub extern "C" fn rocksdb_reset_status(_status_ptr: *mut rocksdb_status_ptr_t) {}

/// The job descriptions c.h defines for listeners: never made here.
macro_rules! never_made {
    ($($t:ident),*) => {$(
        pub struct $t {
            _never: (),
        }
    )*};
}

never_made!(
    rocksdb_flushjobinfo_t,
    rocksdb_compactionjobinfo_t,
    rocksdb_subcompactionjobinfo_t,
    rocksdb_externalfileingestioninfo_t,
    rocksdb_writestallinfo_t,
    rocksdb_writestallcondition_t,
    rocksdb_memtableinfo_t,
    rocksdb_compactionfiltercontext_t
);

/// A name accessor of a job description: none exists, so the name is empty.
fn no_name(len: *mut usize) -> *const c_char {
    set_out(len, 0);
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn rocksdb_flushjobinfo_cf_name(
    _arg1: *const rocksdb_flushjobinfo_t,
    arg2: *mut usize,
) -> *const libc::c_char {
    no_name(arg2)
}

#[no_mangle]
pub extern "C" fn rocksdb_flushjobinfo_file_path(
    _arg1: *const rocksdb_flushjobinfo_t,
    arg2: *mut usize,
) -> *const libc::c_char {
    no_name(arg2)
}

#[no_mangle]
pub extern "C" fn rocksdb_flushjobinfo_triggered_writes_slowdown(
    _arg1: *const rocksdb_flushjobinfo_t,
) -> libc::c_uchar {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_flushjobinfo_triggered_writes_stop(
    _arg1: *const rocksdb_flushjobinfo_t,
) -> libc::c_uchar {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_flushjobinfo_largest_seqno(_arg1: *const rocksdb_flushjobinfo_t) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_flushjobinfo_smallest_seqno(_arg1: *const rocksdb_flushjobinfo_t) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_status(
    _info: *const rocksdb_compactionjobinfo_t,
    _errptr: *mut *mut libc::c_char,
) {
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_cf_name(
    _arg1: *const rocksdb_compactionjobinfo_t,
    arg2: *mut usize,
) -> *const libc::c_char {
    no_name(arg2)
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_input_files_count(
    _arg1: *const rocksdb_compactionjobinfo_t,
) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_input_file_at(
    _arg1: *const rocksdb_compactionjobinfo_t,
    _pos: usize,
    arg2: *mut usize,
) -> *const libc::c_char {
    no_name(arg2)
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_output_files_count(
    _arg1: *const rocksdb_compactionjobinfo_t,
) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_output_file_at(
    _arg1: *const rocksdb_compactionjobinfo_t,
    _pos: usize,
    arg2: *mut usize,
) -> *const libc::c_char {
    no_name(arg2)
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_elapsed_micros(
    _arg1: *const rocksdb_compactionjobinfo_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_num_corrupt_keys(
    _arg1: *const rocksdb_compactionjobinfo_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_base_input_level(
    _arg1: *const rocksdb_compactionjobinfo_t,
) -> libc::c_int {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_output_level(
    _arg1: *const rocksdb_compactionjobinfo_t,
) -> libc::c_int {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_input_records(
    _arg1: *const rocksdb_compactionjobinfo_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_output_records(
    _arg1: *const rocksdb_compactionjobinfo_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_total_input_bytes(
    _arg1: *const rocksdb_compactionjobinfo_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_total_output_bytes(
    _arg1: *const rocksdb_compactionjobinfo_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_compaction_reason(
    _info: *const rocksdb_compactionjobinfo_t,
) -> u32 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_num_input_files(
    _info: *const rocksdb_compactionjobinfo_t,
) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionjobinfo_num_input_files_at_output_level(
    _info: *const rocksdb_compactionjobinfo_t,
) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_subcompactionjobinfo_status(
    _arg1: *const rocksdb_subcompactionjobinfo_t,
    _arg2: *mut *mut libc::c_char,
) {
}

#[no_mangle]
pub extern "C" fn rocksdb_subcompactionjobinfo_cf_name(
    _arg1: *const rocksdb_subcompactionjobinfo_t,
    arg2: *mut usize,
) -> *const libc::c_char {
    no_name(arg2)
}

#[no_mangle]
pub extern "C" fn rocksdb_subcompactionjobinfo_thread_id(
    _arg1: *const rocksdb_subcompactionjobinfo_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_subcompactionjobinfo_base_input_level(
    _arg1: *const rocksdb_subcompactionjobinfo_t,
) -> libc::c_int {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_subcompactionjobinfo_output_level(
    _arg1: *const rocksdb_subcompactionjobinfo_t,
) -> libc::c_int {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_externalfileingestioninfo_cf_name(
    _arg1: *const rocksdb_externalfileingestioninfo_t,
    arg2: *mut usize,
) -> *const libc::c_char {
    no_name(arg2)
}

#[no_mangle]
pub extern "C" fn rocksdb_externalfileingestioninfo_internal_file_path(
    _arg1: *const rocksdb_externalfileingestioninfo_t,
    arg2: *mut usize,
) -> *const libc::c_char {
    no_name(arg2)
}

#[no_mangle]
pub extern "C" fn rocksdb_writestallinfo_cf_name(
    _arg1: *const rocksdb_writestallinfo_t,
    arg2: *mut usize,
) -> *const libc::c_char {
    no_name(arg2)
}

#[no_mangle]
pub extern "C" fn rocksdb_writestallinfo_cur(
    _arg1: *const rocksdb_writestallinfo_t,
) -> *const rocksdb_writestallcondition_t {
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn rocksdb_writestallinfo_prev(
    _arg1: *const rocksdb_writestallinfo_t,
) -> *const rocksdb_writestallcondition_t {
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn rocksdb_memtableinfo_cf_name(
    _arg1: *const rocksdb_memtableinfo_t,
    arg2: *mut usize,
) -> *const libc::c_char {
    no_name(arg2)
}

#[no_mangle]
pub extern "C" fn rocksdb_memtableinfo_first_seqno(_arg1: *const rocksdb_memtableinfo_t) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_memtableinfo_earliest_seqno(_arg1: *const rocksdb_memtableinfo_t) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_memtableinfo_num_entries(_arg1: *const rocksdb_memtableinfo_t) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_memtableinfo_num_deletes(_arg1: *const rocksdb_memtableinfo_t) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionfiltercontext_is_full_compaction(
    _context: *mut rocksdb_compactionfiltercontext_t,
) -> libc::c_uchar {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionfiltercontext_is_manual_compaction(
    _context: *mut rocksdb_compactionfiltercontext_t,
) -> libc::c_uchar {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionfilter_set_ignore_snapshots(
    _arg1: *mut rocksdb_compactionfilter_t,
    _arg2: libc::c_uchar,
) {
}
