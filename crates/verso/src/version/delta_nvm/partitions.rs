//! The version store's partitions (OneShot's partition clearing, TB §2.3.3): where
//! before-images are appended, in time order, and how a whole partition is released.
//!
//! Definitions:
//! - A *partition* is numbered (from 1, never reused) and owns up to `frames_per_partition`
//!   *frames* of the region's space (a before-image larger than a frame gets a run of
//!   frames, counted as one), taken as its appenders need them. Exactly one partition is
//!   *open* (`current`); when its frames are all taken, the next appender that needs one
//!   *rotates*: the open partition is sealed and the next number opened.
//! - Partition `n` lives in ring slot `n % ring.len()`; its [`Gate`] says which partition
//!   the slot holds and in what state.
//! - A partition's *bounds* `[min_end, max_end]`: the lowest and highest end timestamp of
//!   its before-images, i.e. the MVTO ids of the transactions that wrote them.
//!
//! Invariants:
//! - P1. Appends go to the open partition only, each under a pin taken while it was open;
//!   so once a partition is sealed and its pins are gone, its bytes and bounds are final.
//! - P2. Partitions leave `SEALED` in number order (the collector releases the oldest
//!   first and stops at the first it must keep), so `oldest_live` (the oldest partition not
//!   released) only grows, and every link into a partition below it names a released one.
//! - P3. A row's versions lie in non-decreasing partition numbers from its oldest to its
//!   newest (a row's writes are serialized by its latch, and each goes to the partition
//!   open when it is made): each row has at most one run of versions per partition.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::gate::{self, Gate};
use crate::error::{Error, Result};
use crate::pmem::layout::FrameState;
use crate::pmem::space::{Extent, Space};
use crate::pmem::version_index::VersionIndex;
use crate::pmem::LineWriter;

/// A thread's open frame in a partition: where its next before-image goes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenFrame {
    pub(crate) partition: u64,
    /// The frame's index in its partition (`Partition::used`).
    index: usize,
    pub(crate) next: u64,
    pub(crate) end: u64,
}

/// One ring slot: the partition it holds now.
pub(crate) struct Partition {
    pub(crate) gate: Gate,
    /// Appends in progress (P1: taken only while the partition is open; a collector reads
    /// a sealed partition's bounds once none is left).
    appending: AtomicU64,
    /// Frames handed out (may exceed the limit by the appenders that found none left).
    frames_taken: AtomicU64,
    /// Each handed-out frame's first byte and bytes used (stored after each append, so that
    /// a scan after the partition's pins are gone reads whole records only).
    frame_at: Box<[AtomicU64]>,
    frame_used: Box<[AtomicU64]>,
    /// The frames themselves, for the release.
    extents: Mutex<Vec<Extent>>,
    pub(crate) min_end: AtomicU64,
    pub(crate) max_end: AtomicU64,
    /// Before-images in it that a chain links (rolled-back ones leave), and their bytes.
    pub(crate) versions: AtomicU64,
    pub(crate) bytes: AtomicU64,
    /// Set before the partition is released with an index (read under a pin in `INDEXED`).
    pub(crate) index: Mutex<Option<VersionIndex>>,
}

impl Partition {
    fn new(frames_per_partition: usize) -> Partition {
        Partition {
            gate: Gate::default(),
            appending: AtomicU64::new(0),
            frames_taken: AtomicU64::new(0),
            frame_at: (0..frames_per_partition)
                .map(|_| AtomicU64::new(0))
                .collect(),
            frame_used: (0..frames_per_partition)
                .map(|_| AtomicU64::new(0))
                .collect(),
            extents: Mutex::new(Vec::new()),
            min_end: AtomicU64::new(u64::MAX),
            max_end: AtomicU64::new(0),
            versions: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            index: Mutex::new(None),
        }
    }

    /// Enters an append to partition `number` if the slot holds it open (the same Dekker
    /// pair as the gate's pins, against the rotation's seal).
    fn enter_append(&self, number: u64) -> bool {
        self.appending.fetch_add(1, Ordering::SeqCst);
        crate::sync::fence_seq_cst();
        if self.gate.number.load(Ordering::SeqCst) == number
            && self.gate.state.load(Ordering::SeqCst) == gate::OPEN
        {
            return true;
        }
        self.leave_append();
        false
    }

    fn leave_append(&self) {
        self.appending.fetch_sub(1, Ordering::SeqCst);
    }

    /// Waits until the appends that entered before the partition was sealed are done: its
    /// bytes and bounds are final then (P1).
    pub(crate) fn wait_for_appends(&self) {
        debug_assert_eq!(self.gate.state.load(Ordering::SeqCst), gate::SEALED);
        crate::sync::fence_seq_cst();
        while self.appending.load(Ordering::SeqCst) != 0 {
            crate::sync::yield_now();
        }
    }

    /// Every frame's first byte and bytes used (read once the partition is sealed and
    /// unpinned, P1).
    pub(crate) fn frames(&self) -> Vec<(u64, u64)> {
        let taken = (self.frames_taken.load(Ordering::Acquire) as usize).min(self.frame_at.len());
        (0..taken)
            .map(|i| {
                (
                    self.frame_at[i].load(Ordering::Acquire),
                    self.frame_used[i].load(Ordering::Acquire),
                )
            })
            .filter(|&(at, _)| at != 0)
            .collect()
    }
}

/// What the partitions did, since the store opened.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) sealed: AtomicU64,
    pub(crate) released: AtomicU64,
    pub(crate) released_with_index: AtomicU64,
    pub(crate) indexes_freed: AtomicU64,
    pub(crate) versions_released: AtomicU64,
    pub(crate) bytes_released: AtomicU64,
    /// Before-images in partitions not released now (appended, less rolled back, less
    /// released).
    pub(crate) versions_held: AtomicU64,
}

pub(crate) struct Partitions {
    /// Made on first use (a region of small frames has many slots, most never used).
    ring: Box<[std::sync::OnceLock<Box<Partition>>]>,
    frames_per_partition: usize,
    /// The open partition's number.
    pub(crate) current: AtomicU64,
    /// The oldest partition not released (P2).
    pub(crate) oldest_live: AtomicU64,
    /// Serializes rotations.
    rotation: Mutex<()>,
    /// Sealed partitions not released, oldest first; and released ones whose index lives.
    /// Under this lock one collector at a time works.
    pub(crate) waiting: Mutex<(VecDeque<u64>, VecDeque<u64>)>,
    /// Sealed partitions waiting (read without the lock, to skip an empty collection).
    pub(crate) sealed_waiting: AtomicU64,
    pub(crate) counters: Counters,
}

impl Partitions {
    /// Partitions of up to `frames_per_partition` frames in a space of `frame_count`
    /// frames; the first is open.
    pub(crate) fn new(frames_per_partition: u32, frame_count: u64) -> Partitions {
        let per = frames_per_partition.max(1) as usize;
        // Every partition in the ring owns a frame or an index (which owns one): there are
        // never more than the region's frames, and two to spare for the rotation.
        let ring_len = (frame_count as usize).saturating_add(2);
        let partitions = Partitions {
            ring: (0..ring_len).map(|_| std::sync::OnceLock::new()).collect(),
            frames_per_partition: per,
            current: AtomicU64::new(1),
            oldest_live: AtomicU64::new(1),
            rotation: Mutex::new(()),
            waiting: Mutex::new((VecDeque::new(), VecDeque::new())),
            sealed_waiting: AtomicU64::new(0),
            counters: Counters::default(),
        };
        let first = partitions.slot(1);
        first.gate.number.store(1, Ordering::SeqCst);
        first.gate.state.store(gate::OPEN, Ordering::SeqCst);
        partitions
    }

    /// The ring slot of partition `number` (whichever partition it holds now).
    pub(crate) fn slot(&self, number: u64) -> &Partition {
        self.ring[(number % self.ring.len() as u64) as usize]
            .get_or_init(|| Box::new(Partition::new(self.frames_per_partition)))
    }

    /// Appends `bytes` (a before-image whose end timestamp is `end`) to the open partition
    /// through `open` (the thread's open frame) and `writer`. Returns the partition and the
    /// offset. Refused when the region has no room.
    pub(crate) fn append(
        &self,
        space: &Space,
        writer: &mut LineWriter,
        open: &mut Option<OpenFrame>,
        bytes: &[u8],
        end: u64,
    ) -> Result<(u64, u64)> {
        let len = bytes.len() as u64;
        loop {
            let number = self.current.load(Ordering::SeqCst);
            let partition = self.slot(number);
            if !partition.enter_append(number) {
                // Rotated meanwhile: the next one is open.
                crate::sync::yield_now();
                continue;
            }
            let room =
                open.filter(|frame| frame.partition == number && frame.next + len <= frame.end);
            let mut frame = match room {
                Some(frame) => frame,
                None => match self.take_frame(space, writer, number, partition, len) {
                    Ok(Some(frame)) => frame,
                    Ok(None) => {
                        partition.leave_append();
                        self.rotate(number)?;
                        continue;
                    }
                    Err(error) => {
                        partition.leave_append();
                        return Err(error);
                    }
                },
            };
            let at = frame.next;
            writer.store(at, bytes, crate::pmem::Purpose::Content);
            frame.next += len;
            let used = frame.next - partition.frame_at[frame.index].load(Ordering::Relaxed);
            partition.frame_used[frame.index].store(used, Ordering::Release);
            partition.max_end.fetch_max(end, Ordering::SeqCst);
            partition.min_end.fetch_min(end, Ordering::SeqCst);
            // The store-wide count first: it never falls below the partitions' sum.
            self.counters.versions_held.fetch_add(1, Ordering::Relaxed);
            partition.versions.fetch_add(1, Ordering::Relaxed);
            partition.bytes.fetch_add(len, Ordering::Relaxed);
            *open = Some(frame);
            partition.leave_append();
            return Ok((number, at));
        }
    }

    /// A new frame of the open partition `number` for a record of `len` bytes, or
    /// `None` when it has taken all its frames.
    fn take_frame(
        &self,
        space: &Space,
        writer: &mut LineWriter,
        number: u64,
        partition: &Partition,
        len: u64,
    ) -> Result<Option<OpenFrame>> {
        let index = partition.frames_taken.fetch_add(1, Ordering::SeqCst) as usize;
        if index >= self.frames_per_partition {
            return Ok(None);
        }
        let g = *space.geometry();
        let frames = u32::try_from(len.div_ceil(g.frame_bytes).max(1)).unwrap_or(u32::MAX);
        let extent = space.allocate(writer, frames, FrameState::Open)?;
        let at = g.frame_offset(extent.first_frame);
        lock(&partition.extents).push(extent);
        partition.frame_at[index].store(at, Ordering::Release);
        Ok(Some(OpenFrame {
            partition: number,
            index,
            next: at,
            end: at + u64::from(frames) * g.frame_bytes,
        }))
    }

    /// Seals the open partition `number` (if it still is) and opens the next. Refused when
    /// the ring slot of the next is still held (every frame of the region is in partitions
    /// or indexes waiting for collection).
    pub(crate) fn rotate(&self, number: u64) -> Result<()> {
        let _rotation = lock(&self.rotation);
        if self.current.load(Ordering::SeqCst) != number {
            return Ok(());
        }
        let next = number + 1;
        let slot = self.slot(next);
        if slot.gate.state.load(Ordering::SeqCst) != gate::FREE {
            return Err(Error::CapacityExceeded {
                what: "partitions of the delta-nvm version store (every slot of the ring holds \
                       one waiting for collection)"
                    .into(),
                limit: self.ring.len(),
            });
        }
        debug_assert_eq!(slot.gate.number.load(Ordering::SeqCst), 0);
        slot.frames_taken.store(0, Ordering::SeqCst);
        for i in 0..self.frames_per_partition {
            slot.frame_at[i].store(0, Ordering::SeqCst);
            slot.frame_used[i].store(0, Ordering::SeqCst);
        }
        debug_assert!(lock(&slot.extents).is_empty());
        slot.min_end.store(u64::MAX, Ordering::SeqCst);
        slot.max_end.store(0, Ordering::SeqCst);
        slot.versions.store(0, Ordering::SeqCst);
        slot.bytes.store(0, Ordering::SeqCst);
        *lock(&slot.index) = None;
        slot.gate.number.store(next, Ordering::SeqCst);
        slot.gate.state.store(gate::OPEN, Ordering::SeqCst);
        // Sealed: appenders pinned now finish; later ones see it and move on (P1).
        let sealed = self.slot(number);
        sealed.gate.state.store(gate::SEALED, Ordering::SeqCst);
        self.current.store(next, Ordering::SeqCst);
        lock(&self.waiting).0.push_back(number);
        self.sealed_waiting.fetch_add(1, Ordering::SeqCst);
        self.counters.sealed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Releases sealed partition `number` (the oldest not released, P2): waits out its
    /// pins, frees its frames through `writer`, and leaves it `INDEXED` with `index` (the
    /// versions long snapshots still need) or `FREE`. The caller holds `waiting`.
    pub(crate) fn release(
        &self,
        space: &Space,
        writer: &mut LineWriter,
        number: u64,
        index: Option<VersionIndex>,
    ) -> Result<()> {
        debug_assert_eq!(self.oldest_live.load(Ordering::SeqCst), number, "P2");
        let partition = self.slot(number);
        let indexed = index.is_some();
        *lock(&partition.index) = index;
        partition.gate.begin_release(gate::SEALED);
        let extents = std::mem::take(&mut *lock(&partition.extents));
        let freed = space.free(writer, &extents);
        self.oldest_live.store(number + 1, Ordering::SeqCst);
        let c = &self.counters;
        c.released.fetch_add(1, Ordering::Relaxed);
        if indexed {
            c.released_with_index.fetch_add(1, Ordering::Relaxed);
        }
        let versions = partition.versions.load(Ordering::Relaxed);
        c.versions_released.fetch_add(versions, Ordering::Relaxed);
        c.versions_held.fetch_sub(versions, Ordering::Relaxed);
        c.bytes_released
            .fetch_add(partition.bytes.load(Ordering::Relaxed), Ordering::Relaxed);
        partition
            .gate
            .finish_release(if indexed { gate::INDEXED } else { gate::FREE });
        freed
    }

    /// Frees the index of released partition `number`: no snapshot can need it any more.
    pub(crate) fn free_index(
        &self,
        space: &Space,
        writer: &mut LineWriter,
        number: u64,
    ) -> Result<()> {
        let partition = self.slot(number);
        partition.gate.begin_release(gate::INDEXED);
        let index = lock(&partition.index).take();
        let freed = match index {
            Some(index) => space.free(writer, &index.extents),
            None => Ok(()),
        };
        self.counters.indexes_freed.fetch_add(1, Ordering::Relaxed);
        partition.gate.finish_release(gate::FREE);
        freed
    }

    /// Partitions not released (open or sealed) and those released whose index lives.
    pub(crate) fn now(&self) -> (u64, u64) {
        let current = self.current.load(Ordering::Relaxed);
        let oldest = self.oldest_live.load(Ordering::Relaxed);
        let indexed = lock(&self.waiting).1.len() as u64;
        (current + 1 - oldest.min(current + 1), indexed)
    }
}

/// A mutex's guard, whether or not a thread panicked holding it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
