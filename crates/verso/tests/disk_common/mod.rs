//! Helpers shared by the disk engine's tests (`page_log.rs`, `commit_log.rs`, `heap_file.rs`,
//! `co_located.rs`, ...): a simulated disk, a buffer pool over a recovered page log with
//! its files attached, a heap with its commit log and free-space map, and a small seeded
//! generator.

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

/// A heap's files in the heap tests: the commit log, the heap, its free-space map.
pub const XACT: FileNo = FileNo(1);
/// The heap's file.
pub const HEAP: FileNo = FileNo(2);
/// The heap's free-space map's file.
pub const FSM: FileNo = FileNo(3);

/// A heap file with its commit log, free-space map and pool, opened over a simulated disk.
pub struct OpenedHeap {
    pub log: Arc<PageLog>,
    pub pool: Arc<BufferPool>,
    pub txns: verso::disk::DiskTransactions,
    pub heap: verso::disk::HeapFile,
}

/// Opens (recovering) the heap test's files on `fs` with a pool of `frames` pages, the heap
/// pruning by `pruning` and placing new versions by `placement`.
pub fn open_heap(
    fs: &Arc<SimulatedFileSystem>,
    frames: usize,
    durability: Durability,
    pruning: verso::disk::Pruning,
    placement: verso::disk::VersionPlacement,
) -> verso::Result<OpenedHeap> {
    let (log, pool, _) = open_pool_with_files(
        fs,
        frames,
        durability,
        &[
            ("/db/xact", XACT),
            ("/db/heap", HEAP),
            ("/db/heap.fsm", FSM),
        ],
    )?;
    let commit_log = verso::disk::CommitLog::open(Arc::clone(&pool), XACT, Arc::clone(&log))?;
    let txns = verso::disk::DiskTransactions::open(commit_log)?;
    let fsm = verso::disk::FreeSpaceMap::open(Arc::clone(&pool), FSM)?;
    let heap = verso::disk::HeapFile::open(Arc::clone(&pool), HEAP, fsm, Arc::clone(&log))?
        .with_pruning(pruning)
        .with_placement(placement);
    Ok(OpenedHeap {
        log,
        pool,
        txns,
        heap,
    })
}
