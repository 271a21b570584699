//! The disk engine's free-space map (`verso::disk::FreeSpaceMap`) against a model, through
//! a pool small enough that map pages are evicted and read back; exclusion (SI-CV's pages
//! owned by live transactions); truncation; where successive searches go; stale upper
//! levels; torn and foreign pages; the log never waited for; a power loss; threads.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use verso::disk::free_space_map::{available_category, needed_category, SLOTS};
use verso::disk::{
    BufferPool, FileNo, FreeSpaceMap, PageId, ReplacementPolicy, Unlogged, WriteAheadLog,
};
use verso::fs::{Fault, FileSystem, OpenMode, SimulatedFileSystem};
use verso::Error;

const FILE: &str = "/db/heap.fsm";

fn disk() -> Arc<SimulatedFileSystem> {
    let fs = Arc::new(SimulatedFileSystem::new(1));
    fs.create_dir_all(Path::new("/db")).unwrap();
    fs
}

fn map_over(fs: &SimulatedFileSystem, frames: usize) -> FreeSpaceMap {
    let file = match fs.open(Path::new(FILE), OpenMode::ReadWrite) {
        Ok(file) => file,
        Err(_) => {
            let file = fs.open(Path::new(FILE), OpenMode::CreateNew).unwrap();
            fs.sync_dir(Path::new("/db")).unwrap();
            file
        }
    };
    let pool = Arc::new(BufferPool::new(
        frames,
        ReplacementPolicy::Clock,
        Arc::new(Unlogged),
    ));
    pool.attach(FileNo(4), Path::new(FILE), file).unwrap();
    FreeSpaceMap::open(pool, FileNo(4)).unwrap()
}

/// Heap blocks spread over several level-0 pages and two level-1 pages.
fn block() -> impl Strategy<Value = u32> {
    prop_oneof![
        0u32..5000,
        (0u32..2).prop_map(|k| k * SLOTS * SLOTS + 17),
        (0u32..4).prop_map(|k| k * 300 * SLOTS + 3),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    Record(u32, usize),
    Find(usize, u32),
    Truncate(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (block(), 0usize..8200).prop_map(|(b, f)| Op::Record(b, f)),
        4 => (1usize..8200, 0u32..4).prop_map(|(n, e)| Op::Find(n, e)),
        1 => block().prop_map(Op::Truncate),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The map answers as a `BTreeMap` of categories does: `find` returns a block whose
    /// recorded category is enough and that is not excluded, and `None` only when the model
    /// has no such block; `truncate` forgets the blocks at and past its end; `recorded`
    /// gives what was recorded; every upper slot is its child's root with no `vacuum`
    /// (no crash here leaves one stale), and after one. Four frames, so map pages are
    /// evicted and read back.
    #[test]
    fn the_map_answers_as_a_model_does(ops in proptest::collection::vec(op(), 1..120)) {
        let fs = disk();
        let map = map_over(&fs, 4);
        let mut model: BTreeMap<u32, u8> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Record(block, free) => {
                    map.record(block, free).unwrap();
                    model.insert(block, available_category(free));
                }
                Op::Find(bytes, excluded_mod) => {
                    // Excludes blocks whose number is 0 mod 4 when `excluded_mod` is 0.
                    let exclude = |b: u32| excluded_mod == 0 && b % 4 == 0;
                    let need = needed_category(bytes).map_or(u8::MAX, |c| c.max(1));
                    let found = map.find(bytes, &exclude).unwrap();
                    let any = model.iter().any(|(&b, &c)| c >= need && !exclude(b));
                    match found {
                        Some(b) => {
                            prop_assert!(needed_category(bytes).is_some());
                            prop_assert!(!exclude(b));
                            prop_assert!(model.get(&b).copied().unwrap_or(0) >= need);
                        }
                        None => prop_assert!(
                            !any || needed_category(bytes).is_none(),
                            "missed a block with room for {bytes}"
                        ),
                    }
                }
                Op::Truncate(end) => {
                    map.truncate(end).unwrap();
                    model.retain(|&block, _| block < end);
                }
            }
        }
        for (&block, &category) in &model {
            prop_assert_eq!(map.recorded(block).unwrap(), category);
        }
        map.check().unwrap();
        map.vacuum().unwrap();
        map.check().unwrap();
    }
}

#[test]
fn excluded_blocks_are_never_given_and_all_excluded_is_none() {
    let fs = disk();
    let map = map_over(&fs, 8);
    for block in 0..10 {
        map.record(block, 4000).unwrap();
    }
    assert_eq!(map.find(100, &|_| true).unwrap(), None);
    let found = map.find(100, &|b| b != 7).unwrap();
    assert_eq!(found, Some(7));
    // Searches spread: successive finds of the same size do not all return one block.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        seen.insert(map.find(100, &|_| false).unwrap().unwrap());
    }
    assert!(seen.len() > 5, "{seen:?}");
    // Room smaller than asked is never given.
    map.record(3, 8190).unwrap();
    assert_eq!(map.find(5000, &|_| false).unwrap(), Some(3));
    assert_eq!(map.find(8160, &|_| false).unwrap(), Some(3));
    // More than category 255 promises: no page is known to have it.
    assert_eq!(map.find(8161, &|_| false).unwrap(), None);
}

/// Successive finds take the blocks of one level-0 page in order before they move to the
/// next page's (PostgreSQL's next-slot hints, advanced past the slot found at the bottom
/// level only): inserts fill heap blocks near each other. Advancing the upper pages' hints
/// too sent every other find to the other page.
#[test]
fn successive_finds_fill_one_map_page_s_blocks_before_the_next() {
    let fs = disk();
    let map = map_over(&fs, 8);
    let first_page = [0, 1, 2, 3];
    let second_page = first_page.map(|b| SLOTS + b);
    for block in first_page.into_iter().chain(second_page) {
        map.record(block, 4000).unwrap();
    }
    let found: Vec<u32> = (0..4)
        .map(|_| map.find(100, &|_| false).unwrap().unwrap())
        .collect();
    assert_eq!(found, first_page);
    // The first page filled up: the searches move on to the second.
    for block in first_page {
        map.record(block, 0).unwrap();
    }
    let found: Vec<u32> = (0..4)
        .map(|_| map.find(100, &|_| false).unwrap().unwrap())
        .collect();
    assert_eq!(found, second_page);
}

/// `truncate(n)` (a vacuum cutting the heap file to `n` blocks) forgets the room of blocks
/// `n` and after, on the level-0 page holding `n`, on the pages after it and under the
/// later level-1 pages, and sets the upper slots above them from their children: no
/// search is sent past the new end, and the map checks.
#[test]
fn truncate_forgets_the_blocks_at_and_past_the_new_end() {
    let fs = disk();
    let map = map_over(&fs, 8);
    let end = SLOTS + 5;
    let blocks = [10, SLOTS + 4, end, 3 * SLOTS + 1, SLOTS * SLOTS + 7];
    for block in blocks {
        map.record(block, 4000).unwrap();
    }
    map.truncate(end).unwrap();
    let room = available_category(4000);
    assert_eq!(
        blocks.map(|b| map.recorded(b).unwrap()),
        [room, room, 0, 0, 0]
    );
    map.check().unwrap();
    assert_eq!(map.find(100, &|b| b < end).unwrap(), None, "past the end");
    assert_eq!(map.find(100, &|b| b == 10).unwrap(), Some(SLOTS + 4));
    // A heap that grows again has its new blocks recorded as before.
    map.record(SLOTS * SLOTS + 7, 4000).unwrap();
    assert_eq!(
        map.find(100, &|b| b < end).unwrap(),
        Some(SLOTS * SLOTS + 7)
    );
    // Truncating past every block changes nothing; to 0, everything goes.
    map.truncate(u32::MAX).unwrap();
    map.check().unwrap();
    assert_eq!(map.recorded(SLOTS * SLOTS + 7).unwrap(), room);
    map.truncate(0).unwrap();
    assert_eq!(map.find(1, &|_| false).unwrap(), None);
    assert_eq!(blocks.map(|b| map.recorded(b).unwrap()), [0; 5]);
    map.check().unwrap();
}

/// A log that remembers the largest LSN a write-back asked it to make durable.
#[derive(Debug, Default)]
struct WatchedLog(AtomicU64);

impl WriteAheadLog for WatchedLog {
    fn make_durable(&self, lsn: u64) -> verso::Result<()> {
        self.0.fetch_max(lsn, Ordering::Relaxed);
        Ok(())
    }
}

/// The map is not logged: no write-back of its pages waits for the log, even of a page
/// that held another structure's logged page, which the map starts over whole.
/// Regression: such a page had its body zeroed and its kind set but kept its LSN, so its
/// write-back waited for a record that is not the map's.
#[test]
fn map_pages_never_make_the_log_wait() {
    let fs = disk();
    let file = fs.open(Path::new(FILE), OpenMode::CreateNew).unwrap();
    let log = Arc::new(WatchedLog::default());
    let pool = Arc::new(BufferPool::new(3, ReplacementPolicy::Clock, log.clone()));
    pool.attach(FileNo(4), Path::new(FILE), file).unwrap();
    // Another structure's page, logged at LSN 77, where level-0 page 0 goes (block 2).
    pool.extend_to(FileNo(4), 3).unwrap();
    {
        let mut page = pool.write(PageId::new(FileNo(4), 2)).unwrap();
        page.set_kind(0xB702);
        page.set_lsn(77);
        page.body_mut()[..100].fill(0xFF);
    }
    pool.flush().unwrap();
    assert_eq!(log.0.swap(0, Ordering::Relaxed), 77, "the log is watched");
    let map = FreeSpaceMap::open(pool, FileNo(4)).unwrap();
    assert_eq!(map.recorded(5).unwrap(), 0, "a foreign page holds no room");
    for block in (0..20 * SLOTS).step_by(997) {
        map.record(block, 3000).unwrap();
    }
    map.vacuum().unwrap();
    map.truncate(10 * SLOTS).unwrap();
    map.pool().flush().unwrap();
    assert!(map.pool().stats().pages_written > 3);
    assert_eq!(log.0.load(Ordering::Relaxed), 0);
    map.check().unwrap();
}

/// Regression: a search that lowered a stale slot (its level-0 page lost its room in a
/// crash) and then found a block under another slot of the same level-1 page left the
/// root's slot above promising the lost room; the search now carries a lowered slot up.
#[test]
fn regression_a_find_that_lowers_a_slot_and_finds_elsewhere_leaves_no_slot_stale() {
    let fs = disk();
    let map = map_over(&fs, 16);
    map.record(5, 8000).unwrap(); // level-0 page 0 (block 2 of the file)
    map.record(SLOTS + 1, 4000).unwrap(); // level-0 page 1
    map.pool().flush().unwrap();
    drop(map);
    fs.overwrite_durably(Path::new(FILE), 2 * 8192, &[0; 8192])
        .unwrap();
    fs.crash();
    fs.restart();
    let map = map_over(&fs, 16);
    assert!(
        map.check().is_err(),
        "the upper slots promise block 5's room"
    );
    assert_eq!(map.find(2000, &|_| false).unwrap(), Some(SLOTS + 1));
    map.check().unwrap();
}

/// An upper slot promising more than its child holds (left stale by a crash) is lowered by
/// the search that meets it, and `vacuum` repairs every such slot.
#[test]
fn stale_upper_slots_are_repaired_by_find_and_vacuum() {
    let fs = disk();
    let map = map_over(&fs, 16);
    map.record(5, 8000).unwrap();
    map.record(SLOTS * 3 + 1, 100).unwrap();
    map.record(5, 0).unwrap();
    map.vacuum().unwrap();
    map.check().unwrap();
    map.record(5, 8000).unwrap();
    map.check().unwrap();
    // Make the map stale: overwrite block 5's leaf page on disk with a tree of zeros after
    // a flush, so the upper levels promise room the leaf page no longer has.
    map_pool_flush(&map, &fs);
    let leaf_page_block = 2u64; // level-0 page 0 (depth-first layout)
    fs.overwrite_durably(Path::new(FILE), leaf_page_block * 8192, &[0; 8192])
        .unwrap();
    fs.crash();
    fs.restart();
    let map = map_over(&fs, 16);
    assert!(
        map.check().is_err(),
        "the upper levels promise what the leaf lost"
    );
    assert_eq!(map.find(4000, &|_| false).unwrap(), None);
    map.check().unwrap();
    map.record(5, 8000).unwrap();
    assert_eq!(map.find(4000, &|_| false).unwrap(), Some(5));
}

fn map_pool_flush(map: &FreeSpaceMap, _fs: &SimulatedFileSystem) {
    map.pool().flush().unwrap();
}

/// A torn map page reads as no room and is rewritten, with no error; an I/O error reaches
/// the caller and leaves the map usable.
#[test]
fn a_torn_page_is_no_room_and_an_io_error_is_an_error() {
    let fs = disk();
    let map = map_over(&fs, 16);
    for block in 0..100 {
        map.record(block, 2000).unwrap();
    }
    map.pool().flush().unwrap();
    drop(map);
    fs.overwrite_durably(Path::new(FILE), 2 * 8192 + 1000, &[0xA5; 300])
        .unwrap();
    fs.crash();
    fs.restart();
    let map = map_over(&fs, 16);
    assert_eq!(map.recorded(50).unwrap(), 0, "the torn page holds nothing");
    map.vacuum().unwrap();
    map.check().unwrap();
    map.record(50, 3000).unwrap();
    assert_eq!(map.find(2500, &|_| false).unwrap(), Some(50));
    // An I/O error.
    map.pool().flush().unwrap();
    let fresh = {
        drop(map);
        map_over(&fs, 2)
    };
    fs.fail_after(1, Fault::Eio);
    let failed = fresh.recorded(SLOTS * 5);
    let failed_again = fresh.record(SLOTS * 9, 100);
    assert!(
        matches!(failed, Err(Error::Io { .. })) || matches!(failed_again, Err(Error::Io { .. })),
        "{failed:?} {failed_again:?}"
    );
    fs.clear_faults();
    fresh.record(SLOTS * 9, 100).unwrap();
    assert_eq!(fresh.recorded(SLOTS * 9).unwrap(), available_category(100));
}

#[test]
fn a_flushed_map_survives_a_power_loss() {
    let fs = disk();
    let map = map_over(&fs, 8);
    for block in (0..20_000).step_by(7) {
        map.record(block, (block as usize * 13) % 8192).unwrap();
    }
    map.pool().flush().unwrap();
    drop(map);
    fs.crash();
    fs.restart();
    let map = map_over(&fs, 8);
    for block in (0..20_000).step_by(7) {
        assert_eq!(
            map.recorded(block).unwrap(),
            available_category((block as usize * 13) % 8192)
        );
    }
    map.check().unwrap();
}

/// Threads record and find at once; afterwards every block holds its last recorded value
/// and, after `vacuum`, every upper slot is its child's root.
#[test]
fn threads_recording_and_finding_keep_the_map_whole() {
    let fs = disk();
    let map = map_over(&fs, 12);
    std::thread::scope(|scope| {
        for t in 0..4u32 {
            let map = map.clone();
            scope.spawn(move || {
                for i in 0..3000u32 {
                    // Each thread owns the blocks congruent to t mod 4.
                    let block = (i * 4 + t) % (3 * SLOTS);
                    map.record(block, ((i * 37 + t) % 8192) as usize).unwrap();
                    if i % 5 == 0 {
                        if let Some(b) = map.find(2000, &|_| false).unwrap() {
                            assert!(b < 3 * SLOTS);
                        }
                    }
                }
            });
        }
    });
    for t in 0..4u32 {
        let mut last = BTreeMap::new();
        for i in 0..3000u32 {
            last.insert((i * 4 + t) % (3 * SLOTS), ((i * 37 + t) % 8192) as usize);
        }
        for (block, free) in last {
            assert_eq!(map.recorded(block).unwrap(), available_category(free));
        }
    }
    map.vacuum().unwrap();
    map.check().unwrap();
}

/// Regression (a review of 2026-11-29): the map is unlogged and its pages are written back
/// independently, so a crash can leave an upper slot lower than its child (here the
/// level-1 page as it was before the leaf had room). `record` went up only when the leaf
/// page's root changed, so recording the heap pages again never brought the room back;
/// now every `record` refreshes the slots on its page's path to the root.
#[test]
fn regression_recording_again_repairs_an_upper_slot_left_too_low() {
    let fs = disk();
    let map = map_over(&fs, 16);
    map.record(5, 8000).unwrap();
    map.record(6, 8000).unwrap();
    map.pool().flush().unwrap();
    drop(map);
    fs.overwrite_durably(Path::new(FILE), 8192, &[0; 8192])
        .unwrap();
    fs.crash();
    fs.restart();
    let map = map_over(&fs, 16);
    assert_eq!(map.recorded(6).unwrap(), 250);
    map.record(6, 4000).unwrap();
    map.record(6, 8000).unwrap();
    assert!(
        matches!(map.find(100, &|_| false).unwrap(), Some(5 | 6)),
        "blocks 5 and 6 are recorded with room but find sees none"
    );
}

/// Regression (the same review): a crash can leave an upper slot for a child page past the
/// file's end (the parent written back, the child not); `vacuum` skipped such slots, so
/// they kept promising room. Now it zeroes them, and `check` holds after it.
#[test]
fn regression_vacuum_zeroes_the_slots_of_children_past_the_end() {
    let fs = disk();
    let map = map_over(&fs, 16);
    map.record(SLOTS * 5, 8000).unwrap(); // level-0 page 5: block 7
    map.pool().flush().unwrap();
    drop(map);
    let file = fs.open(Path::new(FILE), OpenMode::ReadWrite).unwrap();
    file.set_len(2 * 8192).unwrap(); // the root and level-1 page 0 only
    file.sync_data().unwrap();
    drop(file);
    fs.crash();
    fs.restart();
    let map = map_over(&fs, 16);
    map.vacuum().unwrap();
    map.check().unwrap();
}
