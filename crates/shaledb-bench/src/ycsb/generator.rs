//! YCSB's number generators, reproduced from YCSB 0.17's `site.ycsb.generator` package so that
//! key choice has exactly YCSB's shape: FNV-64 key hashing, Zipfian (Gray et al., "Quickly
//! Generating Billion-Record Synthetic Databases"), scrambled Zipfian, skewed-latest, uniform
//! and the acknowledged insert counter.

use rand::Rng;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// FNV-1a over the 8 little-endian bytes of `value`.
pub fn fnv1a64(value: u64) -> u64 {
    value
        .to_le_bytes()
        .iter()
        .fold(FNV_OFFSET_BASIS_64, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME_64)
        })
}

/// YCSB's `Utils.fnvhash64`: [`fnv1a64`], then `Math.abs` of the result as a signed 64-bit
/// integer.
pub fn fnvhash64(value: u64) -> u64 {
    (fnv1a64(value) as i64).wrapping_abs() as u64
}

/// YCSB's key for ordinal `keynum` with `insertorder=hashed`: "user" + the hashed number.
pub fn key_name(keynum: u64) -> String {
    format!("user{}", fnvhash64(keynum) as i64)
}

/// The Zipfian constant YCSB uses (`zipfian.constant` default).
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

fn zeta_range(start: u64, end: u64, theta: f64, initial: f64) -> f64 {
    (start..end).fold(initial, |sum, i| sum + 1.0 / ((i + 1) as f64).powf(theta))
}

struct ZipfianState {
    items: u64,
    zetan: f64,
    eta: f64,
}

/// YCSB's `ZipfianGenerator`: popular items are the low numbers of `base..base+items`.
pub struct Zipfian {
    base: u64,
    theta: f64,
    alpha: f64,
    zeta2theta: f64,
    state: Mutex<ZipfianState>,
}

impl Zipfian {
    /// Items `min..=max` with YCSB's default constant; computes zeta(n) (O(n)).
    pub fn new(min: u64, max: u64) -> Self {
        let items = max - min + 1;
        Self::with_zetan(
            min,
            max,
            ZIPFIAN_CONSTANT,
            zeta_range(0, items, ZIPFIAN_CONSTANT, 0.0),
        )
    }

    /// Items `min..=max` with a precomputed zeta(n), as YCSB's scrambled generator does.
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Self {
        let items = max - min + 1;
        let zeta2theta = zeta_range(0, 2, theta, 0.0);
        let eta = Self::eta(items, theta, zeta2theta, zetan);
        Zipfian {
            base: min,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2theta,
            state: Mutex::new(ZipfianState { items, zetan, eta }),
        }
    }

    fn eta(items: u64, theta: f64, zeta2theta: f64, zetan: f64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan)
    }

    /// The next value for a population of `item_count` items (YCSB's `nextLong(itemcount)`),
    /// updating zeta incrementally when the population grew. A smaller count than the last one
    /// (a thread that read the insert counter a moment earlier) keeps the larger population's
    /// zeta, as YCSB does unless `allowitemcountdecrease` is set: recomputing it is O(n) under
    /// the lock, and stalled every thread of workload D at 16 threads.
    pub fn next_for(&self, item_count: u64, rng: &mut impl Rng) -> u64 {
        let (zetan, eta) = {
            let mut state = self.state.lock().expect("zipfian state");
            if item_count > state.items {
                state.zetan = zeta_range(state.items, item_count, self.theta, state.zetan);
                state.items = item_count;
                state.eta = Self::eta(item_count, self.theta, self.zeta2theta, state.zetan);
            }
            (state.zetan, state.eta)
        };
        let u: f64 = rng.gen();
        let uz = u * zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (item_count as f64 * (eta * u - eta + 1.0).powf(self.alpha)) as u64
    }

    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        let items = self.state.lock().expect("zipfian state").items;
        self.next_for(items, rng)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: Zipfian popularity spread over the key space by hashing.
pub struct ScrambledZipfian {
    min: u64,
    item_count: u64,
    zipfian: Zipfian,
}

impl ScrambledZipfian {
    /// YCSB draws from a fixed 10-billion-item Zipfian with this precomputed zeta(n) and folds
    /// it onto the key space with FNV-64.
    const ITEM_COUNT: u64 = 10_000_000_000;
    const ZETAN: f64 = 26.46902820178302;

    pub fn new(min: u64, max: u64) -> Self {
        ScrambledZipfian {
            min,
            item_count: max - min + 1,
            zipfian: Zipfian::with_zetan(0, Self::ITEM_COUNT, ZIPFIAN_CONSTANT, Self::ZETAN),
        }
    }

    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        let value = self.zipfian.next(rng);
        self.min + fnvhash64(value) % self.item_count
    }
}

/// YCSB's `AcknowledgedCounterGenerator`: hands out insert ordinals and tracks the highest one
/// below which every insert has completed, so readers never choose a key not yet written.
pub struct AcknowledgedCounter {
    next: AtomicU64,
    acknowledged_limit: AtomicU64,
    pending: Mutex<BTreeSet<u64>>,
}

impl AcknowledgedCounter {
    /// Counter whose first value is `start` (the number of loaded records).
    pub fn new(start: u64) -> Self {
        AcknowledgedCounter {
            next: AtomicU64::new(start),
            acknowledged_limit: AtomicU64::new(start.saturating_sub(1)),
            pending: Mutex::new(BTreeSet::new()),
        }
    }

    pub fn next_value(&self) -> u64 {
        self.next.fetch_add(1, Ordering::SeqCst)
    }

    /// Marks `value` as inserted.
    pub fn acknowledge(&self, value: u64) {
        let mut pending = self.pending.lock().expect("counter state");
        pending.insert(value);
        let mut limit = self.acknowledged_limit.load(Ordering::SeqCst);
        while pending.remove(&(limit + 1)) {
            limit += 1;
        }
        self.acknowledged_limit.store(limit, Ordering::SeqCst);
    }

    /// The highest ordinal below which every insert completed (YCSB's `lastValue`).
    pub fn last_value(&self) -> u64 {
        self.acknowledged_limit.load(Ordering::SeqCst)
    }
}

/// YCSB's `SkewedLatestGenerator`: Zipfian over recency, the newest insert most popular.
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    pub fn new(record_count: u64) -> Self {
        SkewedLatest {
            zipfian: Zipfian::new(0, record_count.max(2) - 1),
        }
    }

    pub fn next(&self, counter: &AcknowledgedCounter, rng: &mut impl Rng) -> u64 {
        let max = counter.last_value();
        max - self.zipfian.next_for(max + 1, rng).min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn key_names_match_ycsb() {
        // Keys YCSB 0.17 generates with insertorder=hashed for ordinals 0, 1 and 2.
        assert_eq!(key_name(0), "user6284781860667377211");
        assert_eq!(key_name(1), "user8517097267634966620");
        assert_eq!(key_name(2), "user1820151046732198393");
    }

    #[test]
    fn a_stale_smaller_population_keeps_the_larger_zeta_and_stays_in_range() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let zipfian = Zipfian::new(0, 999);
        zipfian.next_for(2000, &mut rng);
        let grown = zipfian.state.lock().unwrap().zetan;
        for _ in 0..10_000 {
            assert!(zipfian.next_for(1500, &mut rng) < 1500);
        }
        let state = zipfian.state.lock().unwrap();
        assert_eq!((state.items, state.zetan), (2000, grown));
    }

    #[test]
    fn zipfian_frequencies_follow_the_power_law() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let zipfian = Zipfian::new(0, 999);
        let mut counts = vec![0u64; 1000];
        let draws = 400_000;
        for _ in 0..draws {
            counts[zipfian.next(&mut rng) as usize] += 1;
        }
        // P(i) = 1/(i+1)^0.99 / zeta(1000): item 0 about 13.3%, item 9 about 1.4%.
        let zetan: f64 = (1..=1000).map(|i| 1.0 / (i as f64).powf(0.99)).sum();
        for item in [0usize, 1, 9, 99] {
            let expected = draws as f64 / ((item + 1) as f64).powf(0.99) / zetan;
            let observed = counts[item] as f64;
            assert!(
                (observed - expected).abs() < expected * 0.1 + 30.0,
                "item {item}: {observed} vs {expected}"
            );
        }
        assert!(counts.iter().all(|&count| count > 0 || counts.len() > 500));
    }

    #[test]
    fn scrambled_zipfian_spreads_hot_keys_but_keeps_skew() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let generator = ScrambledZipfian::new(0, 9_999);
        let mut counts = vec![0u64; 10_000];
        for _ in 0..200_000 {
            counts[generator.next(&mut rng) as usize] += 1;
        }
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|left, right| right.cmp(left));
        let top_1_percent: u64 = sorted[..100].iter().sum();
        assert!(
            top_1_percent > 200_000 / 5,
            "the hottest 1% of keys take over a fifth of accesses"
        );
        let hottest = counts.iter().position(|&count| count == sorted[0]).unwrap();
        assert_ne!(
            hottest, 0,
            "hot keys are scrambled away from the low ordinals"
        );
    }

    #[test]
    fn latest_prefers_recent_inserts() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let counter = AcknowledgedCounter::new(1000);
        let latest = SkewedLatest::new(1000);
        let draws: Vec<u64> = (0..50_000)
            .map(|_| latest.next(&counter, &mut rng))
            .collect();
        assert!(draws.iter().all(|&value| value <= 999));
        let newest = draws.iter().filter(|&&value| value == 999).count();
        assert!(
            newest > 50_000 / 10,
            "the newest record is the most popular: {newest}"
        );
        let value = counter.next_value();
        assert_eq!(value, 1000);
        counter.acknowledge(value);
        assert_eq!(counter.last_value(), 1000);
    }

    #[test]
    fn acknowledged_counter_waits_for_gaps() {
        let counter = AcknowledgedCounter::new(10);
        let (a, b) = (counter.next_value(), counter.next_value());
        counter.acknowledge(b);
        assert_eq!(counter.last_value(), 9, "10 is not acknowledged yet");
        counter.acknowledge(a);
        assert_eq!(counter.last_value(), 11);
    }
}
