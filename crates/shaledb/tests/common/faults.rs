//! A storage that fails on demand, beneath the engine (`Options::storage`): writes that fail
//! with a chosen error (after half their bytes landed, if torn), syncs that fail, and reads that
//! return a flipped bit. It wraps the operating system's storage and otherwise keeps its
//! contract.

use shaledb::{OsStorage, Storage, StorageFile};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What to break, changeable while the KVDB runs.
#[derive(Debug, Default)]
pub struct Plan {
    /// Every segment write fails with this OS error (errno) while set.
    pub write_error: Option<i32>,
    /// A failing write lands its first half (in whole pages) before failing: a torn write.
    pub torn_writes: bool,
    /// Every `fdatasync` fails with this OS error while set.
    pub sync_error: Option<i32>,
    /// Reads of the file whose name ends with `.0` return the byte at offset `.1` flipped.
    pub flip_on_read: Option<(String, u64)>,
    /// What was broken so far.
    pub failed_writes: u64,
    pub failed_syncs: u64,
    pub flipped_reads: u64,
}

#[derive(Debug, Clone, Default)]
pub struct FaultyStorage {
    pub plan: Arc<Mutex<Plan>>,
}

impl FaultyStorage {
    pub fn change(&self, change: impl FnOnce(&mut Plan)) {
        change(&mut self.plan.lock().unwrap());
    }

    pub fn as_storage(&self) -> Arc<dyn Storage> {
        Arc::new(self.clone())
    }
}

struct FaultyFile {
    inner: Box<dyn StorageFile>,
    path: PathBuf,
    plan: Arc<Mutex<Plan>>,
}

impl Storage for FaultyStorage {
    fn create(&self, path: &Path, direct_io: bool) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(FaultyFile {
            inner: OsStorage.create(path, direct_io)?,
            path: path.to_owned(),
            plan: self.plan.clone(),
        }))
    }

    fn open(
        &self,
        path: &Path,
        direct_io: bool,
        writable: bool,
    ) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(FaultyFile {
            inner: OsStorage.open(path, direct_io, writable)?,
            path: path.to_owned(),
            plan: self.plan.clone(),
        }))
    }
}

impl StorageFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let read = self.inner.read_at(buf, offset)?;
        let mut plan = self.plan.lock().unwrap();
        if let Some((name, at)) = &plan.flip_on_read {
            let named = self.path.to_string_lossy().ends_with(name.as_str());
            if named && *at >= offset && *at < offset + read as u64 {
                buf[(*at - offset) as usize] ^= 0x01;
                plan.flipped_reads += 1;
            }
        }
        Ok(read)
    }

    fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let (error, torn) = {
            let plan = self.plan.lock().unwrap();
            (plan.write_error, plan.torn_writes)
        };
        let Some(errno) = error else {
            return self.inner.write_all_at(data, offset);
        };
        if torn {
            let half = data.len() / 2 / 4096 * 4096;
            self.inner.write_all_at(&data[..half], offset)?;
        }
        self.plan.lock().unwrap().failed_writes += 1;
        Err(io::Error::from_raw_os_error(errno))
    }

    fn sync_data(&self) -> io::Result<()> {
        let error = self.plan.lock().unwrap().sync_error;
        match error {
            Some(errno) => {
                self.plan.lock().unwrap().failed_syncs += 1;
                Err(io::Error::from_raw_os_error(errno))
            }
            None => self.inner.sync_data(),
        }
    }

    fn len_bytes(&self) -> io::Result<u64> {
        self.inner.len_bytes()
    }

    fn is_direct(&self) -> bool {
        self.inner.is_direct()
    }
}
