//! Stripe locks: writers of one key serialize on the lock of the key's stripe (one of a fixed
//! number, chosen by a hash of the key), so locks take no memory per key.

/// One stripe's lock: std's mutex, which spins briefly then sleeps on a futex, where
/// parking_lot's also yields the CPU several times first (sched_yield was 7% of a hot key's
/// pipelined writes from two network threads, the other thread holding the stripe for a whole
/// pipeline). A stripe guards no data of its own, so a poisoned lock is taken as it is.
#[derive(Default)]
pub struct StripeLock(std::sync::Mutex<()>);

pub type StripeGuard<'a> = std::sync::MutexGuard<'a, ()>;

impl StripeLock {
    pub fn lock(&self) -> StripeGuard<'_> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// FNV-1a of `key`: cheap, spreads keys well, and stable across restarts and versions (the
/// Redis layout's key counts are kept per stripe of it).
pub fn key_hash(key: &[u8]) -> u64 {
    key_hash_from(0xcbf2_9ce4_8422_2325, key)
}

/// FNV-1a continued from `hash` over `bytes` (a key hashed in pieces).
pub fn key_hash_from(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv_1a() {
        // The published FNV-1a 64-bit test vectors: stripes (and the key counts stored per
        // stripe) depend on these values never changing.
        assert_eq!(key_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(key_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(key_hash(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_poisoned_stripe_is_still_taken() {
        let stripe = std::sync::Arc::new(StripeLock::default());
        let held = stripe.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock();
            panic!("poisons the lock");
        })
        .join();
        drop(stripe.lock());
    }
}
