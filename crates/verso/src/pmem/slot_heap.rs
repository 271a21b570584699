//! Slots of a region reused by size: the allocator of the storages that keep one record per
//! slot and never release space, only reuse it (the append-nvm storage's versions, the
//! delta-nvm storage's newest versions: TB-Collect §2.3.1, "placed into the reuse list of
//! the corresponding table").
//!
//! Definitions:
//! - A slot's *capacity* is what it holds rounded up to [`SLOT_ALIGN`] bytes; slots start at
//!   such offsets. New slots are cut from a thread's *open frame* (a frame of the region's
//!   space); a slot that does not fit in the rest of it opens a new frame (the rest is left
//!   unused), a slot larger than a frame gets frames of its own.
//! - A *reuse list* per table holds the slots freed, by capacity; a new slot of that table
//!   and capacity is taken from it before one is cut. One mutex per table.
//!
//! Invariant: a slot is on at most one reuse list, at most once, and only while nothing
//! links it (its storage's invariant says when that is).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::layout::FrameState;
use super::space::Space;
use super::{LineWriter, SlotStats};
use crate::error::Result;

/// Slots are cut in multiples of this (and start at such offsets).
pub(crate) const SLOT_ALIGN: u64 = 64;

/// The capacity of a slot holding `bytes` bytes.
pub(crate) fn capacity_for(bytes: u64) -> u64 {
    bytes.div_ceil(SLOT_ALIGN) * SLOT_ALIGN
}

/// The reuse lists of one table: free slots by capacity.
type ReuseList = Mutex<std::collections::BTreeMap<u64, Vec<u64>>>;

/// Every table's reuse lists and the counters of the slots.
#[derive(Default)]
pub(crate) struct SlotHeap {
    /// Each table's reuse lists, by table index (grown as tables are made).
    reuse: RwLock<Vec<Arc<ReuseList>>>,
    slots_cut: AtomicU64,
    slots_reused: AtomicU64,
    slots_freed: AtomicU64,
    /// Slots on the reuse lists now, and their bytes.
    slots_on_reuse_lists: AtomicU64,
    bytes_on_reuse_lists: AtomicU64,
}

impl SlotHeap {
    /// `table`'s reuse lists.
    fn reuse_list(&self, table: u32) -> Arc<ReuseList> {
        let index = table as usize;
        if let Some(list) = read(&self.reuse).get(index) {
            return Arc::clone(list);
        }
        let mut lists = write(&self.reuse);
        while lists.len() <= index {
            lists.push(Arc::default());
        }
        Arc::clone(&lists[index])
    }

    /// A slot of `capacity` bytes for `table`: from its reuse list, or cut from `open` (the
    /// calling thread's open frame: the next free byte and the frame's end), new frames
    /// allocated through `writer`. Refused when the region has no room.
    pub(crate) fn take(
        &self,
        space: &Space,
        writer: &mut LineWriter,
        open: &mut Option<(u64, u64)>,
        (table, capacity): (u32, u64),
    ) -> Result<u64> {
        debug_assert!(capacity > 0 && capacity % SLOT_ALIGN == 0);
        let reused = lock(&self.reuse_list(table))
            .get_mut(&capacity)
            .and_then(Vec::pop);
        if let Some(at) = reused {
            self.slots_reused.fetch_add(1, Ordering::Relaxed);
            self.slots_on_reuse_lists.fetch_sub(1, Ordering::Relaxed);
            self.bytes_on_reuse_lists
                .fetch_sub(capacity, Ordering::Relaxed);
            return Ok(at);
        }
        let at = cut(space, writer, open, capacity)?;
        self.slots_cut.fetch_add(1, Ordering::Relaxed);
        Ok(at)
    }

    /// Puts the slot at `at`, of `capacity` bytes, on `table`'s reuse list.
    pub(crate) fn free(&self, table: u32, at: u64, capacity: u64) {
        debug_assert_eq!(at % SLOT_ALIGN, 0);
        lock(&self.reuse_list(table))
            .entry(capacity)
            .or_default()
            .push(at);
        self.slots_freed.fetch_add(1, Ordering::Relaxed);
        self.slots_on_reuse_lists.fetch_add(1, Ordering::Relaxed);
        self.bytes_on_reuse_lists
            .fetch_add(capacity, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> SlotStats {
        SlotStats {
            slots_cut: self.slots_cut.load(Ordering::Relaxed),
            slots_reused: self.slots_reused.load(Ordering::Relaxed),
            slots_freed: self.slots_freed.load(Ordering::Relaxed),
            slots_on_reuse_lists: self.slots_on_reuse_lists.load(Ordering::Relaxed),
            bytes_on_reuse_lists: self.bytes_on_reuse_lists.load(Ordering::Relaxed),
        }
    }
}

/// A new slot of `capacity` bytes: cut from the open frame, from a new frame when it does
/// not fit (the rest of the old one is left unused), or frames of its own when it is larger
/// than a frame.
fn cut(
    space: &Space,
    writer: &mut LineWriter,
    open: &mut Option<(u64, u64)>,
    capacity: u64,
) -> Result<u64> {
    let g = *space.geometry();
    if capacity > g.frame_bytes {
        let frames = u32::try_from(capacity.div_ceil(g.frame_bytes)).unwrap_or(u32::MAX);
        let extent = space.allocate(writer, frames, FrameState::Open)?;
        return Ok(g.frame_offset(extent.first_frame));
    }
    if let Some((next, end)) = *open {
        if next + capacity <= end {
            *open = Some((next + capacity, end));
            return Ok(next);
        }
    }
    let extent = space.allocate(writer, 1, FrameState::Open)?;
    let at = g.frame_offset(extent.first_frame);
    debug_assert_eq!(at % SLOT_ALIGN, 0);
    *open = Some((at + capacity, at + g.frame_bytes));
    Ok(at)
}

/// A mutex's guard, whether or not a thread panicked holding it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}
