//! Helpers shared by the disk engine's crash tests (`page_log.rs`, `commit_log.rs`): a
//! simulated disk, a buffer pool over a recovered page log with one file attached, and a
//! small seeded generator.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use verso::disk::{BufferPool, FileNo, PageLog, RedoStats, ReplacementPolicy, WriteAheadLog};
use verso::fs::{FileSystem, OpenMode, SimulatedFileSystem};
use verso::{Durability, Error};

/// The database directory on the simulated disk.
pub const DIR: &str = "/db";

/// A simulated disk with [`DIR`] created.
pub fn disk(seed: u64) -> Arc<SimulatedFileSystem> {
    let fs = Arc::new(SimulatedFileSystem::new(seed));
    fs.create_dir_all(Path::new(DIR)).unwrap();
    fs
}

/// Opens the page log in [`DIR`] (recovering it, 64 KiB segments), a pool of `frames`
/// over it, the file at `path` as file `number` (created, and the directory synced, if
/// missing), and redoes the log into the pool.
pub fn open_pool(
    fs: &Arc<SimulatedFileSystem>,
    frames: usize,
    durability: Durability,
    path: &str,
    number: FileNo,
) -> verso::Result<(Arc<PageLog>, Arc<BufferPool>, RedoStats)> {
    open_pool_with_files(fs, frames, durability, &[(path, number)])
}

/// [`open_pool`] with several files attached before the redo.
pub fn open_pool_with_files(
    fs: &Arc<SimulatedFileSystem>,
    frames: usize,
    durability: Durability,
    files: &[(&str, FileNo)],
) -> verso::Result<(Arc<PageLog>, Arc<BufferPool>, RedoStats)> {
    let recovering = PageLog::open(
        Arc::clone(fs) as Arc<dyn FileSystem>,
        Path::new(DIR),
        durability,
        64 << 10,
    )?;
    let log = recovering.log();
    let pool = Arc::new(BufferPool::new(
        frames,
        ReplacementPolicy::Clock,
        Arc::clone(&log) as Arc<dyn WriteAheadLog>,
    ));
    for &(path, number) in files {
        let file = match fs.open(Path::new(path), OpenMode::ReadWrite) {
            Ok(file) => file,
            Err(_) => {
                let file = fs
                    .open(Path::new(path), OpenMode::CreateNew)
                    .map_err(|e| io(path, e))?;
                fs.sync_dir(Path::new(DIR)).map_err(|e| io(DIR, e))?;
                file
            }
        };
        pool.attach(number, Path::new(path), file)?;
    }
    let redo = recovering.redo(&pool)?;
    Ok((log, pool, redo))
}

fn io(path: &str, e: std::io::Error) -> Error {
    Error::Io {
        path: path.into(),
        operation: "opening a test's file",
        kind: e.kind(),
        message: e.to_string(),
    }
}

/// A small xorshift generator, so a failing seed repeats.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The live transactions with a version on heap page `block` of `file` (sorted, each
/// once; none on a page that is not a heap page): SI-CV's P1 says at most one. A creator
/// found live after its tuple was read was live when it was read (an id is live over one
/// interval and never reused), so a violation seen is real.
pub fn live_creators_on_page(
    pool: &BufferPool,
    file: FileNo,
    block: u32,
    is_live: impl Fn(u64) -> bool,
) -> Vec<u64> {
    let page = pool.read(verso::disk::PageId::new(file, block)).unwrap();
    if page.kind() != verso::disk::KIND_HEAP_PAGE {
        return Vec::new();
    }
    let heap = verso::disk::HeapPage::new(page.body());
    let mut creators: Vec<u64> = (1..=heap.lines())
        .filter_map(|line| heap.header(line))
        .map(|header| header.xmin)
        .collect();
    drop(page);
    creators.sort_unstable();
    creators.dedup();
    creators.retain(|&xid| is_live(xid));
    creators
}
