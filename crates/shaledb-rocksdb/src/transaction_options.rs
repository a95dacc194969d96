//! The option objects of transactions: `rocksdb_transactiondb_options_t` (lock limits and
//! timeouts of a TransactionDB), `rocksdb_transaction_options_t` (one pessimistic
//! transaction's) and `rocksdb_optimistictransaction_options_t`. Every setter records its value
//! (settings.rs); the ones with a ShaleDB meaning are read back by name below, with RocksDB's
//! defaults. `num_stripes` is recorded only: the lock table here is one map under one mutex.

use crate::args::{drop_handle, into_handle};
use crate::settings::{recorded_knobs, Settings};
use crate::status::quiet;
use std::time::Duration;

/// Most keys one column family's lock table holds when `max_num_locks` is not positive
/// (RocksDB: no limit): a lock beyond fails with RocksDB's LockLimit status.
pub(crate) const LOCKS_PER_COLUMN_FAMILY_DEFAULT: usize = 1 << 20;

/// Longest wait for a lock under a negative timeout, which RocksDB reads as "wait forever":
/// bounded here, so a lost wake-up or an undetected deadlock ends with "Operation timed out".
pub(crate) const LOCK_WAIT_FOREVER_CAP: Duration = Duration::from_secs(3600);

/// Largest write set of a transaction, in RocksDB's serialized bytes, when
/// `max_write_batch_size` is 0 (RocksDB: no limit); ShaleDB's largest batch bounds it too.
pub(crate) const WRITE_SET_BYTES_DEFAULT: usize = 64 << 20;

/// How long a lock may be waited for: RocksDB's milliseconds (0: not at all; negative: forever,
/// here [`LOCK_WAIT_FOREVER_CAP`]).
pub(crate) fn lock_wait(timeout_ms: i64) -> Duration {
    match u64::try_from(timeout_ms) {
        Ok(ms) => Duration::from_millis(ms).min(LOCK_WAIT_FOREVER_CAP),
        Err(_) => LOCK_WAIT_FOREVER_CAP,
    }
}

/// `rocksdb_transactiondb_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_transactiondb_options_t {
    pub(crate) settings: Settings,
}

impl rocksdb_transactiondb_options_t {
    /// Most locked keys per column family.
    pub(crate) fn max_locks(&self) -> usize {
        let max: i64 = self.settings.value(
            TRANSACTIONDB_KNOBS,
            "rocksdb_transactiondb_options_set_max_num_locks",
        );
        usize::try_from(max)
            .ok()
            .filter(|max| *max > 0)
            .unwrap_or(LOCKS_PER_COLUMN_FAMILY_DEFAULT)
    }

    /// The lock timeout of transactions whose own options leave it at -1, in milliseconds.
    pub(crate) fn transaction_lock_timeout(&self) -> i64 {
        self.settings.value(
            TRANSACTIONDB_KNOBS,
            "rocksdb_transactiondb_options_set_transaction_lock_timeout",
        )
    }

    /// The lock timeout of writes made through the TransactionDB outside a transaction.
    pub(crate) fn default_lock_timeout(&self) -> i64 {
        self.settings.value(
            TRANSACTIONDB_KNOBS,
            "rocksdb_transactiondb_options_set_default_lock_timeout",
        )
    }
}

/// `rocksdb_transaction_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_transaction_options_t {
    pub(crate) settings: Settings,
}

impl rocksdb_transaction_options_t {
    fn value(&self, setter: &str) -> i64 {
        self.settings.value(TRANSACTION_KNOBS, setter)
    }

    /// Whether the transaction takes a snapshot when it begins (and validates what it locks
    /// against it).
    pub(crate) fn set_snapshot(&self) -> bool {
        self.settings.flag(
            TRANSACTION_KNOBS,
            "rocksdb_transaction_options_set_set_snapshot",
        )
    }

    pub(crate) fn deadlock_detect(&self) -> bool {
        self.settings.flag(
            TRANSACTION_KNOBS,
            "rocksdb_transaction_options_set_deadlock_detect",
        )
    }

    /// The deadlock search's depth (RocksDB's default 50).
    pub(crate) fn deadlock_detect_depth(&self) -> usize {
        usize::try_from(self.value("rocksdb_transaction_options_set_deadlock_detect_depth"))
            .unwrap_or(0)
    }

    /// Milliseconds; -1: the TransactionDB's `transaction_lock_timeout`.
    pub(crate) fn lock_timeout(&self) -> i64 {
        self.value("rocksdb_transaction_options_set_lock_timeout")
    }

    /// Milliseconds after which other transactions may take this one's locks; negative: never.
    pub(crate) fn expiration(&self) -> Option<Duration> {
        u64::try_from(self.value("rocksdb_transaction_options_set_expiration"))
            .ok()
            .map(Duration::from_millis)
    }

    /// The write set's largest serialized size.
    pub(crate) fn max_write_batch_size(&self) -> usize {
        let size: usize = self.settings.value(
            TRANSACTION_KNOBS,
            "rocksdb_transaction_options_set_max_write_batch_size",
        );
        if size == 0 {
            WRITE_SET_BYTES_DEFAULT
        } else {
            size
        }
    }

    /// Whether a commit may skip prepare (RocksDB's default: yes).
    pub(crate) fn skip_prepare(&self) -> bool {
        self.settings.flag(
            TRANSACTION_KNOBS,
            "rocksdb_transaction_options_set_skip_prepare",
        )
    }
}

/// `rocksdb_optimistictransaction_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_optimistictransaction_options_t {
    pub(crate) settings: Settings,
}

impl rocksdb_optimistictransaction_options_t {
    /// Whether the transaction takes its snapshot when it begins (else at its first write or
    /// get-for-update).
    pub(crate) fn set_snapshot(&self) -> bool {
        self.settings.flag(
            OPTIMISTIC_KNOBS,
            "rocksdb_optimistictransaction_options_set_set_snapshot",
        )
    }
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_options_create() -> *mut rocksdb_transactiondb_options_t {
    into_handle(rocksdb_transactiondb_options_t::default())
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_options_destroy(
    options: *mut rocksdb_transactiondb_options_t,
) {
    quiet((), || drop_handle(options))
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_options_create() -> *mut rocksdb_transaction_options_t {
    into_handle(rocksdb_transaction_options_t::default())
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_options_destroy(options: *mut rocksdb_transaction_options_t) {
    quiet((), || drop_handle(options))
}

#[no_mangle]
pub extern "C" fn rocksdb_optimistictransaction_options_create(
) -> *mut rocksdb_optimistictransaction_options_t {
    into_handle(rocksdb_optimistictransaction_options_t::default())
}

#[no_mangle]
pub extern "C" fn rocksdb_optimistictransaction_options_destroy(
    options: *mut rocksdb_optimistictransaction_options_t,
) {
    quiet((), || drop_handle(options))
}

recorded_knobs!(rocksdb_transactiondb_options_t, TRANSACTIONDB_KNOBS, "rocksdb_transactiondb_options_set_" {
        rocksdb_transactiondb_options_set_max_num_locks(i64) = -1, -;
        rocksdb_transactiondb_options_set_num_stripes(usize) = 16, -;
        rocksdb_transactiondb_options_set_transaction_lock_timeout(i64) = 1000, -;
        rocksdb_transactiondb_options_set_default_lock_timeout(i64) = 1000, -;
});

recorded_knobs!(rocksdb_transaction_options_t, TRANSACTION_KNOBS, "rocksdb_transaction_options_set_" {
        rocksdb_transaction_options_set_set_snapshot(libc::c_uchar) = 0, -;
        rocksdb_transaction_options_set_deadlock_detect(libc::c_uchar) = 0, -;
        rocksdb_transaction_options_set_lock_timeout(i64) = -1, -;
        rocksdb_transaction_options_set_expiration(i64) = -1, -;
        rocksdb_transaction_options_set_deadlock_detect_depth(i64) = 50, -;
        rocksdb_transaction_options_set_max_write_batch_size(usize) = 0, -;
        rocksdb_transaction_options_set_skip_prepare(libc::c_uchar) = 1, -;
});

recorded_knobs!(rocksdb_optimistictransaction_options_t, OPTIMISTIC_KNOBS, "rocksdb_optimistictransaction_options_set_" {
        rocksdb_optimistictransaction_options_set_set_snapshot(libc::c_uchar) = 0, -;
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_rocksdbs_and_setters_are_read_back() {
        let db = rocksdb_transactiondb_options_t::default();
        assert_eq!(db.max_locks(), LOCKS_PER_COLUMN_FAMILY_DEFAULT);
        assert_eq!(db.transaction_lock_timeout(), 1000);
        assert_eq!(db.default_lock_timeout(), 1000);
        let txn = rocksdb_transaction_options_t::default();
        assert!(!txn.set_snapshot() && !txn.deadlock_detect() && txn.skip_prepare());
        assert_eq!(txn.lock_timeout(), -1);
        assert_eq!(txn.expiration(), None);
        assert_eq!(txn.deadlock_detect_depth(), 50);
        assert_eq!(txn.max_write_batch_size(), WRITE_SET_BYTES_DEFAULT);

        let db = rocksdb_transactiondb_options_create();
        rocksdb_transactiondb_options_set_max_num_locks(db, 3);
        rocksdb_transactiondb_options_set_transaction_lock_timeout(db, 10);
        rocksdb_transactiondb_options_set_num_stripes(db, 4);
        // SAFETY: created above, destroyed once below.
        let read = unsafe { &*db };
        assert_eq!(read.max_locks(), 3);
        assert_eq!(read.transaction_lock_timeout(), 10);
        rocksdb_transactiondb_options_destroy(db);

        let txn = rocksdb_transaction_options_create();
        rocksdb_transaction_options_set_set_snapshot(txn, 1);
        rocksdb_transaction_options_set_expiration(txn, 25);
        rocksdb_transaction_options_set_max_write_batch_size(txn, 100);
        rocksdb_transaction_options_set_skip_prepare(txn, 0);
        // SAFETY: as above.
        let read = unsafe { &*txn };
        assert!(read.set_snapshot() && !read.skip_prepare());
        assert_eq!(read.expiration(), Some(Duration::from_millis(25)));
        assert_eq!(read.max_write_batch_size(), 100);
        rocksdb_transaction_options_destroy(txn);
    }

    #[test]
    fn lock_waits_are_bounded() {
        assert_eq!(lock_wait(0), Duration::ZERO);
        assert_eq!(lock_wait(10), Duration::from_millis(10));
        assert_eq!(lock_wait(-1), LOCK_WAIT_FOREVER_CAP);
        assert_eq!(lock_wait(i64::MAX), LOCK_WAIT_FOREVER_CAP);
    }
}
