//! Loom model checks of the buffer pool's pin, latch and eviction protocol (invariants B1-B5
//! of `buffer_pool.rs`): two threads pin pages of a pool with fewer frames than pages, so
//! loads, dirty write-backs and remappings race in every interleaving, and no change is
//! lost and no reader sees a frame that holds another page; and a page dropped unwritten
//! (B7) beside evictions and readers is never written, and a page written is never
//! dropped; and the undo space's shared pages (U1-U4 of `undo.rs`): transactions append
//! to one open page while another's end frees pages, and no record is lost, read as
//! another's, or freed while its owner needs it. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p verso --lib --release loom`.

use std::io;
use std::path::Path;
use std::sync::Mutex;

use loom::sync::Arc;
use loom::thread;

use super::{BufferPool, DirtyCause, FileNo, PageId, ReplacementPolicy, Unlogged, PAGE_SIZE};
use crate::fs::File;

/// A file in memory. Its lock is held only inside a call, which makes no loom operation, so
/// loom never switches threads while it is held.
#[derive(Debug)]
pub(super) struct MemoryFile(pub(super) Mutex<Vec<u8>>);

impl File for MemoryFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let bytes = self.0.lock().unwrap();
        let start = (offset as usize).min(bytes.len());
        let n = buf.len().min(bytes.len() - start);
        buf[..n].copy_from_slice(&bytes[start..start + n]);
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut bytes = self.0.lock().unwrap();
        let end = offset as usize + buf.len();
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.lock().unwrap().len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
}

fn pool(frames: usize, pages: usize) -> (Arc<BufferPool>, FileNo) {
    let pool = BufferPool::new(
        frames,
        ReplacementPolicy::Clock,
        std::sync::Arc::new(Unlogged),
    );
    let file = FileNo(0);
    pool.attach(
        file,
        Path::new("loom"),
        Box::new(MemoryFile(Mutex::new(vec![0; pages * PAGE_SIZE]))),
    )
    .unwrap();
    (Arc::new(pool), file)
}

fn set(pool: &BufferPool, id: PageId, value: u8) {
    pool.write(id).unwrap().body_mut()[0] = value;
}

fn get(pool: &BufferPool, id: PageId) -> u8 {
    let page = pool.read(id).unwrap();
    assert_eq!(
        page.id(),
        id,
        "a pinned frame holds the page asked for (B5)"
    );
    page.body()[0]
}

/// Two writers over two frames and three pages: every change survives the evictions and
/// write-backs the other thread's pins force.
#[test]
fn loom_two_writers_through_evictions_lose_no_change() {
    loom::model(|| {
        let (pool, file) = pool(2, 3);
        let page = move |block| PageId::new(file, block);
        let other = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || set(&pool, page(1), 2))
        };
        set(&pool, page(0), 1);
        set(&pool, page(2), 3);
        other.join().unwrap();
        assert_eq!(
            [
                get(&pool, page(0)),
                get(&pool, page(1)),
                get(&pool, page(2))
            ],
            [1, 2, 3]
        );
    });
}

/// A reader and a writer of the same page, while other pages evict it: the reader sees the
/// page before or after the change, never another page's bytes.
#[test]
fn loom_a_reader_beside_a_writer_and_evictions_sees_the_page_whole() {
    loom::model(|| {
        let (pool, file) = pool(2, 3);
        let page = move |block| PageId::new(file, block);
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || get(&pool, page(0)))
        };
        set(&pool, page(0), 7);
        set(&pool, page(1), 8);
        set(&pool, page(2), 9);
        let seen = reader.join().unwrap();
        assert!(seen == 0 || seen == 7, "read {seen}");
        assert_eq!(
            [
                get(&pool, page(0)),
                get(&pool, page(1)),
                get(&pool, page(2))
            ],
            [7, 8, 9]
        );
    });
}

/// Regression (a review of 2026-11-28): a pin that picked a dirty victim pinned it under
/// the table lock but latched it only after letting the lock go, so a thread that pinned
/// the victim meanwhile could latch it exclusive and then wait for a latch the evicting
/// thread held: a deadlock loom reports. The victim's shared latch is now taken under the
/// table lock, where it is free (B2). One thread holds page 0 exclusive and reads page 2,
/// whose only possible victim is dirty page 1 (page 3 is pinned by the main thread); the
/// other latches page 1 exclusive and then waits for page 0.
#[test]
fn loom_evicting_a_dirty_victim_while_holding_a_latch_cannot_deadlock() {
    loom::model(|| {
        let (pool, file) = pool(3, 4);
        let page = move |block| PageId::new(file, block);
        set(&pool, page(1), 1);
        let pinned = pool.read(page(3)).unwrap();
        let other = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let mut one = pool.write(page(1)).unwrap();
                one.body_mut()[1] = 5;
                let mut zero = pool.write(page(0)).unwrap();
                zero.body_mut()[1] = 6;
            })
        };
        {
            let mut zero = pool.write(page(0)).unwrap();
            zero.body_mut()[0] = 4;
            match pool.read(page(2)) {
                Ok(two) => assert_eq!(two.body()[0], 0),
                // The other thread pinned page 1 again and waits for page 0: every frame
                // is pinned, and the read says so rather than waiting for ever.
                Err(crate::Error::CapacityExceeded { .. }) => {}
                Err(other) => panic!("unexpected error {other}"),
            }
        }
        other.join().unwrap();
        drop(pinned);
        let zero = pool.read(page(0)).unwrap();
        assert_eq!(&zero.body()[..2], &[4, 6]);
        drop(zero);
        let one = pool.read(page(1)).unwrap();
        assert_eq!(&one.body()[..2], &[1, 5]);
    });
}

/// Page 0 as a transaction (7) changed it alone: new to its file (the file is zeros).
fn changed_by_seven(pool: &BufferPool, id: PageId) {
    let mut page = pool.write(id).unwrap();
    page.body_mut()[0] = 7;
    page.note_change(DirtyCause::NewVersion, Some(7));
}

/// B7: a drop races another thread's pins, which evict page 0 (a write-back, pinned and
/// latched under the table lock) to make room: either the drop came first and the page
/// is never written (its file still reads zeros), or the write-back did and the drop
/// refuses (the file has the change). Never both, never a torn state: fails when the drop
/// ignores pins or `never_written`, or when the write-back clears it only after the write.
#[test]
fn loom_a_drop_beside_evictions_either_drops_or_writes_the_page() {
    loom::model(|| {
        let (pool, file) = pool(2, 3);
        let page = move |block| PageId::new(file, block);
        changed_by_seven(&pool, page(0));
        let other = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                get(&pool, page(1));
                get(&pool, page(2));
            })
        };
        let dropped = pool.drop_unwritten(page(0), 7, 0).unwrap();
        other.join().unwrap();
        // Page 0 out of the pool (written back first if it is still there), then read from
        // its file.
        get(&pool, page(1));
        get(&pool, page(2));
        let written = pool.stats().pages_written;
        assert_eq!(get(&pool, page(0)), if dropped { 0 } else { 7 });
        assert_eq!(written, u64::from(!dropped), "dropped {dropped}");
    });
}

/// B7: a drop races a reader of the same page: the reader sees the change, or (only once
/// the drop succeeded) the new page its file holds; a drop never takes a page from under
/// a pin (the reader's latch would be taken from it: a panic under loom).
#[test]
fn loom_a_drop_beside_a_reader_of_the_page_never_takes_it_from_under_a_pin() {
    loom::model(|| {
        let (pool, file) = pool(2, 2);
        let page = move |block| PageId::new(file, block);
        changed_by_seven(&pool, page(0));
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || get(&pool, page(0)))
        };
        let dropped = pool.drop_unwritten(page(0), 7, 0).unwrap();
        let seen = reader.join().unwrap();
        assert!(seen == 7 || (dropped && seen == 0), "read {seen}");
        assert_eq!(get(&pool, page(0)), if dropped { 0 } else { 7 });
        assert_eq!(pool.stats().pages_written, 0);
    });
}

/// An undo space over its own page log (no sync: `Durability::None`) and a pool of
/// `frames` frames, on a simulated disk, as the engine opens it.
fn undo_space(frames: usize) -> Arc<super::undo::UndoSpace> {
    use crate::fs::{FileSystem, SimulatedFileSystem};
    let fs: std::sync::Arc<dyn FileSystem> = std::sync::Arc::new(SimulatedFileSystem::new(0));
    let dir = Path::new("/loom-undo");
    fs.create_dir_all(dir).unwrap();
    let recovering = super::PageLog::open(
        std::sync::Arc::clone(&fs),
        dir,
        crate::Durability::None,
        1 << 20,
    )
    .unwrap();
    let log = recovering.log();
    let pool = std::sync::Arc::new(BufferPool::new(
        frames,
        ReplacementPolicy::Clock,
        std::sync::Arc::clone(&log) as std::sync::Arc<dyn super::WriteAheadLog>,
    ));
    let file = FileNo(1);
    pool.attach(
        file,
        Path::new("undo"),
        Box::new(MemoryFile(Mutex::new(Vec::new()))),
    )
    .unwrap();
    recovering.redo(&pool).unwrap();
    let (undo, found) = super::undo::UndoSpace::open(pool, file, log).unwrap();
    assert!(found.by_owner.is_empty());
    Arc::new(undo)
}

/// A record of `owner`'s `n`th change, large enough that two fill an undo page.
fn undo_record(owner: u64, n: u8) -> super::undo::UndoRecord {
    super::undo::UndoRecord {
        kind: super::undo::UndoKind::Update,
        table: 0,
        key: vec![owner as u8, n],
        prev_creator: owner,
        prev_roll: super::undo::RollPtr::NONE,
        prev_deleted: false,
        fresh: 0,
        prefix: 0,
        suffix: 0,
        middle: vec![n; super::undo::MAX_UNDO_RECORD_BYTES / 2 - 100],
        marked: Vec::new(),
        whole: false,
    }
}

/// Two transactions append two records each to the shared open pages (two fill a page,
/// so pages close and open under both), and the first ends (its records done, its pages
/// freed where every record is) while the second still appends: every record the second
/// appended reads back as its own (U1, U3: a page freed and taken again is never read
/// as the old owner's), and once both have ended every page is free (U4).
#[test]
fn loom_undo_appends_share_pages_while_an_end_frees_them() {
    use super::undo::UndoLane;
    loom::model(|| {
        let undo = undo_space(4);
        let first = {
            let undo = Arc::clone(&undo);
            thread::spawn(move || {
                for n in 0..2 {
                    undo.append(1, &undo_record(1, n), UndoLane::Short).unwrap();
                }
                let ended = undo.forget(1).unwrap();
                undo.finish(1, &ended.pages).unwrap();
            })
        };
        let mut mine = Vec::new();
        for n in 0..2 {
            let record = undo_record(2, n);
            mine.push((undo.append(2, &record, UndoLane::Short).unwrap(), record));
        }
        first.join().unwrap();
        for (ptr, record) in &mine {
            let (owner, read) = undo.read(*ptr).unwrap().expect("a live owner's record");
            assert_eq!((owner, &read), (2, record));
        }
        let ended = undo.forget(2).unwrap();
        undo.finish(2, &ended.pages).unwrap();
        let stats = undo.stats();
        assert_eq!(stats.free_pages, stats.pages, "{stats:?}");
    });
}
