//! YCSB's core workloads A–F (YCSB 0.17 `workloads/workload[a-f]`), the record layout and the
//! operations, as YCSB's `CoreWorkload` does them.

use super::generator::{key_name, AcknowledgedCounter, ScrambledZipfian, SkewedLatest};
use crate::engine::Engine;
use crate::measure::{OpKind, Recorder};
use crate::values;
use anyhow::{bail, Result};
use rand::Rng;
use std::sync::OnceLock;
use std::time::Instant;

/// How keys are chosen for reads, updates and scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    Uniform,
    Zipfian,
    Latest,
}

impl std::str::FromStr for Distribution {
    type Err = anyhow::Error;
    fn from_str(text: &str) -> Result<Self> {
        Ok(match text {
            "uniform" => Distribution::Uniform,
            "zipfian" => Distribution::Zipfian,
            "latest" => Distribution::Latest,
            other => bail!("unknown distribution {other:?} (uniform, zipfian, latest)"),
        })
    }
}

/// One core workload's operation mix.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkloadSpec {
    pub name: char,
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
    pub distribution: Distribution,
    /// Scan lengths are uniform in 1..=max_scan_length.
    pub max_scan_length: usize,
}

impl WorkloadSpec {
    /// YCSB's workload file `workload<name>`.
    pub fn core(name: char) -> Result<Self> {
        let spec = |read, update, insert, scan, read_modify_write, distribution| WorkloadSpec {
            name,
            read,
            update,
            insert,
            scan,
            read_modify_write,
            distribution,
            max_scan_length: 100,
        };
        Ok(match name {
            'a' => spec(0.5, 0.5, 0.0, 0.0, 0.0, Distribution::Zipfian),
            'b' => spec(0.95, 0.05, 0.0, 0.0, 0.0, Distribution::Zipfian),
            'c' => spec(1.0, 0.0, 0.0, 0.0, 0.0, Distribution::Zipfian),
            'd' => spec(0.95, 0.0, 0.05, 0.0, 0.0, Distribution::Latest),
            'e' => spec(0.0, 0.0, 0.05, 0.95, 0.0, Distribution::Zipfian),
            'f' => spec(0.5, 0.0, 0.0, 0.0, 0.5, Distribution::Zipfian),
            other => bail!("unknown YCSB workload {other:?} (a to f)"),
        })
    }

    fn choose(&self, rng: &mut impl Rng) -> Operation {
        let mut point: f64 = rng.gen::<f64>()
            * (self.read + self.update + self.insert + self.scan + self.read_modify_write);
        for (weight, operation) in [
            (self.read, Operation::Read),
            (self.update, Operation::Update),
            (self.insert, Operation::Insert),
            (self.scan, Operation::Scan),
            (self.read_modify_write, Operation::ReadModifyWrite),
        ] {
            if point < weight {
                return operation;
            }
            point -= weight;
        }
        Operation::Read
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// Record shape: `field_count` fields of `field_length` bytes (YCSB: 10 x 100), each
/// compressible to `compression_ratio` of its length (1: incompressible, as YCSB's are).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct RecordShape {
    pub field_count: usize,
    pub field_length: usize,
    pub compression_ratio: f64,
}

impl RecordShape {
    /// A record is one value: per field, a u8 name length, the name (`field0`…), a u32 value
    /// length and the value — the same bytes for every engine.
    pub fn build(&self, rng: &mut impl Rng) -> Vec<u8> {
        let mut record = Vec::with_capacity(self.encoded_len());
        for field in 0..self.field_count {
            push_field_name(&mut record, field);
            record.extend_from_slice(&(self.field_length as u32).to_le_bytes());
            let value_at = record.len();
            record.resize(value_at + self.field_length, 0);
            self.fill_field(&mut record[value_at..], rng);
        }
        record
    }

    pub fn encoded_len(&self) -> usize {
        (0..self.field_count)
            .map(|field| 1 + field_name_len(field) + 4 + self.field_length)
            .sum()
    }

    /// Replaces field `field` of `record` with fresh bytes (`writeallfields=false`).
    pub fn update_field(&self, record: &mut [u8], field: usize, rng: &mut impl Rng) -> Result<()> {
        let mut at = 0;
        for index in 0..self.field_count {
            let name_len = *record
                .get(at)
                .ok_or_else(|| anyhow::anyhow!("record too short"))?
                as usize;
            at += 1 + name_len;
            let value_len = u32::from_le_bytes(
                record
                    .get(at..at + 4)
                    .ok_or_else(|| anyhow::anyhow!("record too short"))?
                    .try_into()?,
            ) as usize;
            at += 4;
            if index == field {
                let value = record
                    .get_mut(at..at + value_len)
                    .ok_or_else(|| anyhow::anyhow!("record too short"))?;
                self.fill_field(value, rng);
                return Ok(());
            }
            at += value_len;
        }
        bail!("record has no field {field}")
    }

    /// Fills a field with printable bytes cut from the window, compressible to the shape's
    /// ratio: per half window, one random number (an offset into the window) and a copy of
    /// `len x ratio` bytes, repeated to `len`. Fields longer than half the window repeat its
    /// bytes in different arrangements.
    fn fill_field(&self, value: &mut [u8], rng: &mut impl Rng) {
        let window = printable_window();
        for chunk in value.chunks_mut(PRINTABLE_WINDOW / 2) {
            values::fill_compressible(chunk, self.compression_ratio, window, rng);
        }
    }
}

/// The length of `field{field}`.
fn field_name_len(field: usize) -> usize {
    "field".len()
        + field
            .checked_ilog10()
            .map_or(1, |digits| digits as usize + 1)
}

/// Appends the u8 length and the name `field{field}` (without `format!`, which was a quarter of
/// the generator's cost once values were cheap).
fn push_field_name(record: &mut Vec<u8>, field: usize) {
    record.push(field_name_len(field) as u8);
    record.extend_from_slice(b"field");
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = field;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    record.extend_from_slice(&digits[at..]);
}

/// Size of the window values are cut from. Drawing one random number per value byte was about
/// half the CPU of a load (issue 18); like YCSB's `RandomByteIterator`, which gets several bytes
/// from each random number, a value now costs one random number per field (a random offset into
/// this window) and a copy. Values stay distinct (65,437 offsets for a 100-byte field) and, at
/// compression ratio 1 (the default), incompressible within a record or a 4 KiB block.
const PRINTABLE_WINDOW: usize = 64 * 1024;

/// Random printable bytes (`' '..='~'`, YCSB's alphabet), made once per process from a fixed
/// seed: every run and every engine cuts its values from the same window, so the values depend
/// only on the caller's rng (and the ratio), and a seeded rng reproduces them exactly.
fn printable_window() -> &'static [u8] {
    static WINDOW: OnceLock<Box<[u8]>> = OnceLock::new();
    WINDOW.get_or_init(|| values::printable(PRINTABLE_WINDOW, 0x5ca1_ed18))
}

/// Shared state of a run phase over a loaded data set.
pub struct RunState {
    pub spec: WorkloadSpec,
    pub shape: RecordShape,
    pub inserts: AcknowledgedCounter,
    zipfian: Option<ScrambledZipfian>,
    latest: Option<SkewedLatest>,
    record_count: u64,
}

impl RunState {
    /// `record_count` loaded records (ordinals `0..record_count`), `operation_count` to run.
    pub fn new(
        spec: WorkloadSpec,
        shape: RecordShape,
        record_count: u64,
        operation_count: u64,
    ) -> Self {
        // YCSB sizes the Zipfian key space for the inserts the run is expected to add.
        let expected_new_keys = (operation_count as f64 * spec.insert * 2.0) as u64;
        let zipfian = (spec.distribution == Distribution::Zipfian)
            .then(|| ScrambledZipfian::new(0, record_count + expected_new_keys - 1));
        let latest =
            (spec.distribution == Distribution::Latest).then(|| SkewedLatest::new(record_count));
        RunState {
            spec,
            shape,
            inserts: AcknowledgedCounter::new(record_count),
            zipfian,
            latest,
            record_count,
        }
    }

    /// YCSB's `nextKeynum`: never a key whose insert has not completed.
    fn next_keynum(&self, rng: &mut impl Rng) -> u64 {
        let limit = self.inserts.last_value();
        match self.spec.distribution {
            Distribution::Latest => self
                .latest
                .as_ref()
                .expect("latest generator")
                .next(&self.inserts, rng),
            Distribution::Zipfian => loop {
                let keynum = self.zipfian.as_ref().expect("zipfian generator").next(rng);
                if keynum <= limit {
                    return keynum;
                }
            },
            Distribution::Uniform => rng.gen_range(0..self.record_count.min(limit + 1).max(1)),
        }
    }

    /// Runs one operation chosen by the mix; returns its kind (the caller times it).
    pub fn operation(
        &self,
        engine: &dyn Engine,
        rng: &mut impl Rng,
        recorder: &mut Recorder,
    ) -> Result<OpKind> {
        match self.spec.choose(rng) {
            Operation::Read => {
                self.read(engine, self.next_keynum(rng))?;
                Ok(OpKind::Read)
            }
            Operation::Update => {
                self.update(engine, self.next_keynum(rng), rng)?;
                Ok(OpKind::Update)
            }
            Operation::Insert => {
                let keynum = self.inserts.next_value();
                engine.write(key_name(keynum).as_bytes(), &self.shape.build(rng))?;
                self.inserts.acknowledge(keynum);
                Ok(OpKind::Insert)
            }
            Operation::Scan => {
                let length = rng.gen_range(1..=self.spec.max_scan_length);
                engine.scan(
                    key_name(self.next_keynum(rng)).as_bytes(),
                    length,
                    &mut |_, value| {
                        std::hint::black_box(value);
                    },
                )?;
                Ok(OpKind::Scan)
            }
            Operation::ReadModifyWrite => {
                let keynum = self.next_keynum(rng);
                let started = Instant::now();
                self.read(engine, keynum)?;
                recorder.record(OpKind::Read, started.elapsed());
                let started = Instant::now();
                self.update(engine, keynum, rng)?;
                recorder.record(OpKind::Update, started.elapsed());
                Ok(OpKind::ReadModifyWrite)
            }
        }
    }

    fn read(&self, engine: &dyn Engine, keynum: u64) -> Result<Vec<u8>> {
        let key = key_name(keynum);
        engine
            .read(key.as_bytes())?
            .ok_or_else(|| anyhow::anyhow!("key {key} (ordinal {keynum}) is missing"))
    }

    /// Like YCSB's RocksDB binding: read the record, replace one field, write it back.
    fn update(&self, engine: &dyn Engine, keynum: u64, rng: &mut impl Rng) -> Result<()> {
        let mut record = self.read(engine, keynum)?;
        let field = rng.gen_range(0..self.shape.field_count);
        self.shape.update_field(&mut record, field, rng)?;
        engine.write(key_name(keynum).as_bytes(), &record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn operation_mixes_match_their_proportions() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for name in ['a', 'b', 'd', 'e', 'f'] {
            let spec = WorkloadSpec::core(name).unwrap();
            let draws = 100_000;
            let mut counts = [0usize; 5];
            for _ in 0..draws {
                counts[spec.choose(&mut rng) as usize] += 1;
            }
            let expected = [
                spec.read,
                spec.update,
                spec.insert,
                spec.scan,
                spec.read_modify_write,
            ];
            for (count, proportion) in counts.iter().zip(expected) {
                let observed = *count as f64 / draws as f64;
                assert!(
                    (observed - proportion).abs() < 0.01,
                    "workload {name}: {observed} vs {proportion}"
                );
            }
        }
    }

    #[test]
    fn records_have_ycsb_shape_and_updates_touch_one_field() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let shape = RecordShape {
            field_count: 10,
            field_length: 100,
            compression_ratio: 1.0,
        };
        let record = shape.build(&mut rng);
        assert_eq!(record.len(), shape.encoded_len());
        assert_eq!(record.len(), 10 * (1 + 6 + 4 + 100));
        let mut updated = record.clone();
        shape.update_field(&mut updated, 3, &mut rng).unwrap();
        let changed: Vec<usize> = (0..record.len())
            .filter(|&at| record[at] != updated[at])
            .collect();
        let field_start = 3 * 111 + 11;
        assert!(changed
            .iter()
            .all(|&at| (field_start..field_start + 100).contains(&at)));
        assert!(!changed.is_empty());
    }

    fn value_bytes(shape: &RecordShape, record: &[u8]) -> Vec<u8> {
        let mut values = Vec::new();
        let mut at = 0;
        for field in 0..shape.field_count {
            let name = format!("field{field}");
            assert_eq!(record[at] as usize, name.len());
            assert_eq!(&record[at + 1..at + 1 + name.len()], name.as_bytes());
            at += 1 + name.len();
            let len = u32::from_le_bytes(record[at..at + 4].try_into().unwrap()) as usize;
            assert_eq!(len, shape.field_length);
            at += 4;
            values.extend_from_slice(&record[at..at + len]);
            at += len;
        }
        assert_eq!(at, record.len());
        values
    }

    #[test]
    fn records_differ_and_their_values_are_printable() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for shape in [
            RecordShape {
                field_count: 10,
                field_length: 100,
                compression_ratio: 1.0,
            },
            RecordShape {
                field_count: 12,
                field_length: 1,
                compression_ratio: 1.0,
            },
            // Longer than the window: filled in several copies.
            RecordShape {
                field_count: 2,
                field_length: 100_000,
                compression_ratio: 1.0,
            },
            RecordShape {
                field_count: 10,
                field_length: 100,
                compression_ratio: 0.5,
            },
        ] {
            let first = shape.build(&mut rng);
            let second = shape.build(&mut rng);
            assert_eq!(first.len(), shape.encoded_len());
            assert_ne!(value_bytes(&shape, &first), value_bytes(&shape, &second));
            let mut updated = first.clone();
            shape.update_field(&mut updated, 1, &mut rng).unwrap();
            for record in [&first, &second, &updated] {
                assert!(value_bytes(&shape, record)
                    .iter()
                    .all(|byte| (b' '..=b'~').contains(byte)));
            }
        }
        // The fields of one record differ too, and values use the whole alphabet.
        let shape = RecordShape {
            field_count: 10,
            field_length: 100,
            compression_ratio: 1.0,
        };
        let values = value_bytes(&shape, &shape.build(&mut rng));
        let fields: std::collections::HashSet<&[u8]> = values.chunks(100).collect();
        assert_eq!(fields.len(), 10);
        let mut seen = [false; 256];
        (0..100).for_each(|_| {
            value_bytes(&shape, &shape.build(&mut rng))
                .iter()
                .for_each(|&byte| seen[byte as usize] = true)
        });
        assert!((b' '..=b'~').all(|byte| seen[byte as usize]));
    }

    #[test]
    fn at_ratio_one_records_are_the_bytes_they_were_before_ratios_existed() {
        let shape = RecordShape {
            field_count: 10,
            field_length: 100,
            compression_ratio: 1.0,
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        let bytes: Vec<u8> = (0..3).flat_map(|_| shape.build(&mut rng)).collect();
        let fnv1a = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        // Computed with the harness as it was before compression ratios: the default ratio
        // writes exactly the values it wrote, so earlier results stay comparable.
        assert_eq!(fnv1a, 0xfa51_037c_d14a_5f83);
    }

    #[test]
    fn fields_compress_to_the_ratio() {
        let shape = RecordShape {
            field_count: 10,
            field_length: 100,
            compression_ratio: 0.5,
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let record = shape.build(&mut rng);
        let values = value_bytes(&shape, &record);
        for field in values.chunks(100) {
            assert_eq!(field[..50], field[50..]);
        }
        let mut updated = record.clone();
        shape.update_field(&mut updated, 2, &mut rng).unwrap();
        let field = &value_bytes(&shape, &updated)[200..300];
        assert_eq!(
            field[..50],
            field[50..],
            "an updated field has the same shape"
        );
    }

    #[test]
    fn the_same_seed_builds_the_same_records() {
        let shape = RecordShape {
            field_count: 10,
            field_length: 100,
            compression_ratio: 1.0,
        };
        let build = |seed| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            (0..3).map(|_| shape.build(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(build(4), build(4));
        assert_ne!(build(4), build(5));
    }
}
