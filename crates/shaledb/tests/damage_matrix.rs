//! Goal: damage to any file of a KVDB is detected (a clear error naming it) or harmless (every
//! key as written), never silent loss or resurrection, and `compact` never makes it worse.
//! Method: build a small KVDB with several segments, two KVSs, deletes and a prefix delete, in
//! three states: closed cleanly (a checkpoint covers everything), with its checkpoint removed
//! (so every segment is replayed at open), and crashed right after a sync (its active segments
//! unsealed, as a crash leaves them). For every file of it and every damage (a flipped
//! byte at several offsets, a zeroed 4 KiB page, cut to half, last 100 bytes cut, deleted,
//! emptied), on a fresh copy: open, read every key, check, compact, reopen. Each case is
//! classified; the test fails on any case that is neither detected nor harmless.

mod common;

use common::files::snapshot_files;
use common::small_options;
use shaledb::{Db, ErrorKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Model = BTreeMap<(String, Vec<u8>), Vec<u8>>;
/// What each key read as: its value (empty when absent), or `None` for a `Corruption` error.
type Seen = BTreeMap<(String, Vec<u8>), Option<Vec<u8>>>;

const KVS_NAMES: [&str; 2] = ["alpha", "beta"];

const CRASH_CHILD_ENV: &str = "SHALEDB_DAMAGE_MATRIX_CHILD_DIR";

/// Child mode: builds the KVDB, makes it durable (the sync also records in the manifest how
/// far each active segment is durable), then crashes (aborts) without closing.
#[test]
fn crashed_build_child() {
    if let Ok(dir) = std::env::var(CRASH_CHILD_ENV) {
        write(Path::new(&dir), |db| {
            db.sync().unwrap();
            std::process::abort();
        });
    }
}

/// Writes ~4.5 MB (three 2 MiB segments and more) into two KVSs, with deletes and a prefix
/// delete, closes it, and returns what each key should hold.
fn build(dir: &Path) -> Model {
    write(dir, |db| db.close().unwrap())
}

fn write(dir: &Path, finish: impl FnOnce(Db)) -> Model {
    let db = Db::open(dir, small_options()).unwrap();
    let mut model = Model::new();
    for (which, name) in KVS_NAMES.iter().enumerate() {
        let kvs = db.kvs(name).unwrap();
        for index in 0..1500u32 {
            let key = format!("g{}:{index:05}", index % 4).into_bytes();
            let value = vec![(index as usize + which) as u8; 1200 + (index as usize % 9) * 40];
            kvs.put(&key, &value).unwrap();
            model.insert((name.to_string(), key), value);
        }
        for index in (0..1500u32).step_by(7) {
            let key = format!("g{}:{index:05}", index % 4).into_bytes();
            kvs.delete(&key).unwrap();
            model.remove(&(name.to_string(), key));
        }
    }
    db.kvs("beta").unwrap().prefix_delete(b"g2").unwrap();
    model.retain(|(name, key), _| !(name == "beta" && key.starts_with(b"g2")));
    finish(db);
    model
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Flip(Offset),
    ZeroPage(Offset),
    CutToHalf,
    CutLast100,
    Delete,
    Empty,
}

#[derive(Debug, Clone, Copy)]
enum Offset {
    At(u64),
    Fraction(u64, u64),
    LastNonZero,
}

impl Offset {
    fn resolve(self, bytes: &[u8]) -> Option<usize> {
        let at = match self {
            Offset::At(at) => at as usize,
            Offset::Fraction(num, den) => (bytes.len() as u64 * num / den) as usize,
            Offset::LastNonZero => bytes.iter().rposition(|&byte| byte != 0)?,
        };
        (at < bytes.len()).then_some(at)
    }
}

const DAMAGES: [Damage; 13] = [
    Damage::Flip(Offset::At(0)),
    Damage::Flip(Offset::At(9)),
    Damage::Flip(Offset::At(30)),
    Damage::Flip(Offset::At(4096 + 10)),
    Damage::Flip(Offset::Fraction(1, 3)),
    Damage::Flip(Offset::Fraction(2, 3)),
    Damage::Flip(Offset::LastNonZero),
    Damage::ZeroPage(Offset::At(4096)),
    Damage::ZeroPage(Offset::Fraction(1, 2)),
    Damage::CutToHalf,
    Damage::CutLast100,
    Damage::Delete,
    Damage::Empty,
];

/// Applies `damage` to `path`; false when it does not apply (the file is too short).
fn apply(path: &Path, damage: Damage) -> bool {
    let mut bytes = std::fs::read(path).unwrap();
    match damage {
        Damage::Flip(offset) => {
            let Some(at) = offset.resolve(&bytes) else {
                return false;
            };
            bytes[at] ^= 0x5a;
        }
        Damage::ZeroPage(offset) => {
            let Some(at) = offset.resolve(&bytes) else {
                return false;
            };
            let at = at / 4096 * 4096;
            let end = (at + 4096).min(bytes.len());
            bytes[at..end].fill(0);
        }
        Damage::CutToHalf => bytes.truncate(bytes.len() / 2),
        Damage::CutLast100 => {
            if bytes.len() < 100 {
                return false;
            }
            bytes.truncate(bytes.len() - 100);
        }
        Damage::Delete => {
            std::fs::remove_file(path).unwrap();
            return true;
        }
        Damage::Empty => bytes.clear(),
    }
    std::fs::write(path, bytes).unwrap();
    true
}

fn copy_dir(from: &Path, to: &Path) {
    for (path, bytes) in snapshot_files(from) {
        let target = to.join(path.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Outcome {
    /// The open failed with a clear error naming the file, and wrote nothing.
    RefusedAtOpen,
    /// It opened; every readable key was right, a read named the damage, `check` reported it.
    DetectedOnRead,
    /// It opened; every key right, but `check` reported the damage.
    DetectedByCheck,
    /// It opened; every key right and `check` clean (the damaged bytes were not needed).
    Harmless,
    /// After a crash, damage in an active segment past its last durable point: recovery
    /// cannot tell it from a write the crash tore, drops it as a torn tail and names the file,
    /// the offset and the bytes dropped in its report.
    TornTailReported,
}

/// Reads every key, failing on any value that differs from the model.
fn read_all(db: &Db, model: &Model) -> Result<Seen, String> {
    let mut seen = BTreeMap::new();
    for name in KVS_NAMES {
        let kvs = db
            .kvs(name)
            .map_err(|error| format!("KVS {name}: {error}"))?;
        for index in 0..1500u32 {
            let key = format!("g{}:{index:05}", index % 4).into_bytes();
            let slot = (name.to_string(), key.clone());
            match kvs.get(&key) {
                Ok(value) => {
                    let value = value.map(|value| value.to_vec());
                    if value.as_ref() != model.get(&slot) {
                        return Err(format!(
                            "{name} {:?}: read {:?} bytes, wrote {:?} bytes",
                            String::from_utf8_lossy(&key),
                            value.map(|value| value.len()),
                            model.get(&slot).map(Vec::len)
                        ));
                    }
                    seen.insert(slot, Some(value.unwrap_or_default()));
                }
                Err(error) if error.kind() == ErrorKind::Corruption => {
                    seen.insert(slot, None);
                }
                Err(error) => return Err(format!("{name}: {error}")),
            }
        }
    }
    Ok(seen)
}

/// Runs one case on a fresh copy of `pristine`: returns its outcome, or why it failed.
fn run_case(
    pristine: &Path,
    model: &Model,
    file: &Path,
    damage: Damage,
) -> Option<Result<Outcome, String>> {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("kvdb");
    copy_dir(pristine, &home);
    let target = home.join(file);
    if !apply(&target, damage) {
        return None;
    }
    let before = snapshot_files(&home);
    let db = match Db::open(&home, small_options()) {
        Err(error) => {
            let named = error
                .to_string()
                .contains(&file.file_name().unwrap().to_string_lossy().to_string())
                || error
                    .to_string()
                    .contains(&target.parent().unwrap().to_string_lossy().to_string());
            return Some(if !named {
                Err(format!("refused without naming the file: {error}"))
            } else if snapshot_files(&home) != before {
                Err(format!("a failed open wrote something ({error})"))
            } else {
                Ok(Outcome::RefusedAtOpen)
            });
        }
        Ok(db) => db,
    };
    let file_name = file.file_name().unwrap().to_string_lossy().to_string();
    let torn_reported = db
        .recovery_report()
        .torn_tail_details
        .iter()
        .any(|detail| detail.contains(&file_name));
    let seen = match read_all(&db, model) {
        Ok(seen) => seen,
        Err(_) if torn_reported => return Some(Ok(Outcome::TornTailReported)),
        Err(why) => return Some(Err(format!("silent damage: {why}"))),
    };
    let unreadable = seen.values().filter(|value| value.is_none()).count();
    let check = db.check().unwrap();
    if unreadable > 0 && check.is_ok() {
        return Some(Err(format!(
            "{unreadable} keys unreadable, but check says OK"
        )));
    }
    let compacted = db.compact();
    if unreadable > 0 && compacted.is_ok() {
        return Some(Err("compact ran on a KVDB with found corruption".into()));
    }
    drop(db);
    // Never worse: after compact, what was readable still is (or the open refuses, naming it).
    if let Ok(db) = Db::open(&home, small_options()) {
        match read_all(&db, model) {
            Ok(after) => {
                for (slot, value) in &seen {
                    if value.is_some() && after.get(slot) != Some(value) {
                        return Some(Err(format!("compact lost {slot:?}")));
                    }
                }
            }
            Err(why) => return Some(Err(format!("after compact: {why}"))),
        }
    }
    Some(Ok(if unreadable > 0 {
        Outcome::DetectedOnRead
    } else if !check.is_ok() {
        Outcome::DetectedByCheck
    } else {
        Outcome::Harmless
    }))
}

#[test]
fn every_damage_to_every_file_is_detected_or_harmless() {
    let mut counts: BTreeMap<Outcome, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut cases = 0;
    for state in ["closed", "without checkpoint", "crashed"] {
        let built = tempfile::tempdir().unwrap();
        let model = match state {
            "crashed" => {
                common::run_child_until_it_crashes(
                    "crashed_build_child",
                    CRASH_CHILD_ENV,
                    built.path(),
                );
                // The same writes, replayed in memory for the model.
                build(tempfile::tempdir().unwrap().path())
            }
            _ => build(built.path()),
        };
        if state == "without checkpoint" {
            std::fs::remove_file(built.path().join("capacity/checkpoint.ckpt")).unwrap();
        }
        let names: Vec<PathBuf> = snapshot_files(built.path())
            .into_keys()
            .map(|path| path.strip_prefix(built.path()).unwrap().to_path_buf())
            .collect();
        for file in &names {
            for damage in DAMAGES {
                let Some(result) = run_case(built.path(), &model, file, damage) else {
                    continue;
                };
                cases += 1;
                println!(
                    "{state:>18} {:<36} {damage:<26} {result:?}",
                    file.display(),
                    damage = format!("{damage:?}")
                );
                match result {
                    Ok(outcome) => *counts.entry(outcome).or_default() += 1,
                    Err(why) => {
                        failures.push(format!("{state}: {} {damage:?}: {why}", file.display()))
                    }
                }
            }
        }
    }
    println!(
        "damage matrix: {cases} cases: {counts:?}, failed {}",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
