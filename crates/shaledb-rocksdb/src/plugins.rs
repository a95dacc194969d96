//! Objects a program builds to plug its own code or resources into RocksDB: caches, prefix
//! extractors (slice transforms), comparators, merge operators, compaction filters, filter
//! policies. Caches and prefix extractors have ShaleDB meanings; the code plug-ins that would
//! change what a read returns (comparators, merge operators, compaction filters) cannot be
//! honoured by ShaleDB, so options that carry one make the open fail, naming it.

use crate::args::{drop_handle, handle, handle_mut, into_handle};
use crate::options::rocksdb_options_t;
use crate::status::{quiet, Status};
use libc::{c_char, c_uchar, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A RocksDB feature ShaleDB does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feature {
    Comparator,
    MergeOperator,
    CompactionFilter,
    CompactionFilterFactory,
    InMemoryEnv,
}

impl Feature {
    /// The status of a call that needs this feature.
    pub(crate) fn refused(self) -> Status {
        Status::not_supported(self.what())
    }

    fn what(self) -> &'static str {
        match self {
            Feature::Comparator => "custom comparators (ShaleDB orders keys bytewise)",
            Feature::MergeOperator => "merge operators",
            Feature::CompactionFilter => "compaction filters",
            Feature::CompactionFilterFactory => "compaction filter factories",
            Feature::InMemoryEnv => "an in-memory Env (ShaleDB keeps its data in files)",
        }
    }
}

/// A plug-in set on options that ShaleDB cannot honour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plugin {
    pub feature: Feature,
    pub name: String,
}

impl Plugin {
    pub fn describe(&self) -> String {
        format!("{} ({:?})", self.feature.what(), self.name)
    }
}

/// `rocksdb_cache_t`: a capacity in bytes, shared by every database opened with it. It sizes
/// ShaleDB's value cache (which holds values, where RocksDB's block cache holds blocks).
#[derive(Clone)]
pub struct rocksdb_cache_t {
    capacity: Arc<AtomicUsize>,
    /// The databases opened with this cache, whose value caches its usage sums.
    pub(crate) users: crate::statistics::Users,
}

impl rocksdb_cache_t {
    pub(crate) fn new(capacity: usize) -> *mut rocksdb_cache_t {
        into_handle(rocksdb_cache_t {
            capacity: Arc::new(AtomicUsize::new(capacity)),
            users: Default::default(),
        })
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }
}

#[no_mangle]
pub extern "C" fn rocksdb_cache_create_lru(capacity: usize) -> *mut rocksdb_cache_t {
    rocksdb_cache_t::new(capacity)
}

#[no_mangle]
pub extern "C" fn rocksdb_cache_create_lru_with_strict_capacity_limit(
    capacity: usize,
) -> *mut rocksdb_cache_t {
    rocksdb_cache_t::new(capacity)
}

#[no_mangle]
pub extern "C" fn rocksdb_cache_create_hyper_clock(
    capacity: usize,
    _estimated_entry_charge: usize,
) -> *mut rocksdb_cache_t {
    rocksdb_cache_t::new(capacity)
}

#[no_mangle]
pub extern "C" fn rocksdb_cache_destroy(cache: *mut rocksdb_cache_t) {
    quiet((), || drop_handle(cache))
}

#[no_mangle]
pub extern "C" fn rocksdb_cache_set_capacity(cache: *mut rocksdb_cache_t, capacity: usize) {
    quiet((), || {
        if let Ok(cache) = handle(cache, "cache") {
            cache.capacity.store(capacity, Ordering::Relaxed);
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_cache_get_capacity(cache: *const rocksdb_cache_t) -> usize {
    quiet(0, || {
        handle(cache, "cache").map_or(0, rocksdb_cache_t::capacity)
    })
}

/// How a key is cut into its prefix: `rocksdb_slicetransform_t`.
pub(crate) enum SliceTransform {
    FixedPrefix(usize),
    Noop,
    Custom(CustomTransform),
}

/// A prefix extractor written in C: its state, name and destructor, and the callbacks that cut
/// a key, as `rocksdb_slicetransform_create` received them.
pub(crate) struct CustomTransform {
    plugin: CallbackPlugin,
    transform:
        Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize, *mut usize) -> *mut c_char>,
    in_domain: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> c_uchar>,
}

impl SliceTransform {
    /// The prefix of `key`, if `key` is in the transform's domain.
    pub fn prefix<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        match self {
            SliceTransform::FixedPrefix(len) => key.get(..*len),
            SliceTransform::Noop => Some(key),
            SliceTransform::Custom(custom) => {
                let state = custom.plugin.state;
                if let Some(in_domain) = custom.in_domain {
                    // SAFETY: the callback takes the state and a key slice valid for the call.
                    if unsafe { in_domain(state, key.as_ptr().cast(), key.len()) } == 0 {
                        return None;
                    }
                }
                let transform = custom.transform?;
                let mut len = 0usize;
                // SAFETY: as above; RocksDB's contract is that the result points into `key`.
                let start = unsafe { transform(state, key.as_ptr().cast(), key.len(), &mut len) };
                let offset = (start as usize).checked_sub(key.as_ptr() as usize)?;
                key.get(offset..offset.checked_add(len)?)
            }
        }
    }

    pub fn name(&self) -> String {
        match self {
            SliceTransform::FixedPrefix(len) => format!("rocksdb.FixedPrefix.{len}"),
            SliceTransform::Noop => "rocksdb.Noop".into(),
            SliceTransform::Custom(custom) => custom.plugin.name(),
        }
    }
}

/// `rocksdb_slicetransform_t`.
pub struct rocksdb_slicetransform_t {
    pub(crate) transform: Arc<SliceTransform>,
}

#[no_mangle]
pub extern "C" fn rocksdb_slicetransform_create_fixed_prefix(
    len: usize,
) -> *mut rocksdb_slicetransform_t {
    into_handle(rocksdb_slicetransform_t {
        transform: Arc::new(SliceTransform::FixedPrefix(len)),
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_slicetransform_create_noop() -> *mut rocksdb_slicetransform_t {
    into_handle(rocksdb_slicetransform_t {
        transform: Arc::new(SliceTransform::Noop),
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_slicetransform_create(
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    transform: Option<
        unsafe extern "C" fn(*mut c_void, *const c_char, usize, *mut usize) -> *mut c_char,
    >,
    in_domain: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> c_uchar>,
    _in_range: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> c_uchar>,
    name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
) -> *mut rocksdb_slicetransform_t {
    into_handle(rocksdb_slicetransform_t {
        transform: Arc::new(SliceTransform::Custom(CustomTransform {
            plugin: CallbackPlugin {
                state,
                destructor,
                name,
            },
            transform,
            in_domain,
        })),
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_slicetransform_destroy(transform: *mut rocksdb_slicetransform_t) {
    quiet((), || drop_handle(transform))
}

/// A C function pointer ShaleDB keeps but never calls (the plug-in is refused at open): passed
/// as a pointer, which is how C passes any function pointer.
type UncalledCallback = *const c_void;

/// The state and identity of a plug-in written in C: its state is released with its
/// destructor when the plug-in is dropped (destroyed by the program, and no longer used by
/// options or an open database), as RocksDB does.
pub struct CallbackPlugin {
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
}

// SAFETY: RocksDB calls a plug-in (a slice transform, a comparator) from any thread; c.h's
// contract for the state and callbacks a program registers is the same here.
unsafe impl Send for CallbackPlugin {}
// SAFETY: as above.
unsafe impl Sync for CallbackPlugin {}

impl CallbackPlugin {
    fn name(&self) -> String {
        let Some(name) = self.name else {
            return String::new();
        };
        // SAFETY: the program's name callback takes its state and returns a NUL-terminated
        // string it owns (or NULL).
        let text = unsafe { name(self.state) };
        if text.is_null() {
            return String::new();
        }
        // SAFETY: as above.
        unsafe { std::ffi::CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for CallbackPlugin {
    fn drop(&mut self) {
        if let Some(destructor) = self.destructor {
            // SAFETY: the program gave this destructor for this state, to be called once.
            unsafe { destructor(self.state) };
        }
    }
}

/// `rocksdb_comparator_t`.
pub type rocksdb_comparator_t = CallbackPlugin;
/// `rocksdb_mergeoperator_t`.
pub type rocksdb_mergeoperator_t = CallbackPlugin;
/// `rocksdb_compactionfilter_t`.
pub type rocksdb_compactionfilter_t = CallbackPlugin;
/// `rocksdb_compactionfilterfactory_t`.
pub type rocksdb_compactionfilterfactory_t = CallbackPlugin;

fn plugin(
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
) -> *mut CallbackPlugin {
    into_handle(CallbackPlugin {
        state,
        destructor,
        name,
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_comparator_create(
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    _compare: UncalledCallback,
    name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
) -> *mut rocksdb_comparator_t {
    plugin(state, destructor, name)
}

#[no_mangle]
pub extern "C" fn rocksdb_comparator_with_ts_create(
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    _compare: UncalledCallback,
    _compare_ts: UncalledCallback,
    _compare_without_ts: UncalledCallback,
    name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
    _timestamp_size: usize,
) -> *mut rocksdb_comparator_t {
    plugin(state, destructor, name)
}

#[no_mangle]
pub extern "C" fn rocksdb_comparator_destroy(comparator: *mut rocksdb_comparator_t) {
    quiet((), || drop_handle(comparator))
}

#[no_mangle]
pub extern "C" fn rocksdb_mergeoperator_create(
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    _full_merge: UncalledCallback,
    _partial_merge: UncalledCallback,
    _delete_value: UncalledCallback,
    name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
) -> *mut rocksdb_mergeoperator_t {
    plugin(state, destructor, name)
}

#[no_mangle]
pub extern "C" fn rocksdb_mergeoperator_destroy(merge_operator: *mut rocksdb_mergeoperator_t) {
    quiet((), || drop_handle(merge_operator))
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionfilter_create(
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    _filter: UncalledCallback,
    name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
) -> *mut rocksdb_compactionfilter_t {
    plugin(state, destructor, name)
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionfilter_destroy(filter: *mut rocksdb_compactionfilter_t) {
    quiet((), || drop_handle(filter))
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionfilterfactory_create(
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    _create_compaction_filter: UncalledCallback,
    name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
) -> *mut rocksdb_compactionfilterfactory_t {
    plugin(state, destructor, name)
}

#[no_mangle]
pub extern "C" fn rocksdb_compactionfilterfactory_destroy(
    factory: *mut rocksdb_compactionfilterfactory_t,
) {
    quiet((), || drop_handle(factory))
}

/// Records on `options` a plug-in ShaleDB cannot honour.
fn refuse(options: *mut rocksdb_options_t, feature: Feature, plugin: *const CallbackPlugin) {
    quiet((), || {
        if let Ok(options) = handle_mut(options, "options") {
            let name = handle(plugin, "plug-in").map_or_else(|_| String::new(), |p| p.name());
            options.refuse(feature, name);
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_comparator(
    options: *mut rocksdb_options_t,
    comparator: *mut rocksdb_comparator_t,
) {
    refuse(options, Feature::Comparator, comparator)
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_merge_operator(
    options: *mut rocksdb_options_t,
    merge_operator: *mut rocksdb_mergeoperator_t,
) {
    refuse(options, Feature::MergeOperator, merge_operator)
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_uint64add_merge_operator(options: *mut rocksdb_options_t) {
    quiet((), || {
        if let Ok(options) = handle_mut(options, "options") {
            options.refuse(Feature::MergeOperator, "uint64add".into());
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_compaction_filter(
    options: *mut rocksdb_options_t,
    filter: *mut rocksdb_compactionfilter_t,
) {
    refuse(options, Feature::CompactionFilter, filter)
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_compaction_filter_factory(
    options: *mut rocksdb_options_t,
    factory: *mut rocksdb_compactionfilterfactory_t,
) {
    refuse(options, Feature::CompactionFilterFactory, factory)
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_prefix_extractor(
    options: *mut rocksdb_options_t,
    transform: *mut rocksdb_slicetransform_t,
) {
    quiet((), || {
        if let Ok(options) = handle_mut(options, "options") {
            // NULL removes the extractor.
            options.prefix_extractor = handle(transform, "slice transform")
                .ok()
                .map(|transform| transform.transform.clone());
        }
    })
}
