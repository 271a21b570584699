//! The gate of one partition slot: who may read or append to the partition it holds now,
//! and how its releaser waits for them. Apart from the partitions so that loom can explore
//! it alone (`loom_tests.rs`).
//!
//! Definitions: a *pin* is a reader's or an appender's claim on the slot's partition while
//! it reads or writes the partition's bytes (or its index's). The slot's *number* is the
//! partition it holds (0: none); its *state* says what may be done with it.
//!
//! Invariant (the Dekker pair: pin, then look; mark, then count): a pin taken while the
//! state is `OPEN`, `SEALED` or `INDEXED` and the number the expected one holds that
//! partition's bytes (frames, or the index) in place until it is dropped, because a
//! releaser marks the state `RELEASING` before it counts pins, and frees nothing until it
//! counted none. Both sides' accesses are sequentially consistent (with a fence between
//! each side's store and load, which loom needs to see the order).

use crate::sync::AtomicU64;
use std::sync::atomic::Ordering;

/// No partition, or one whose bytes are gone.
pub(crate) const FREE: u64 = 0;
/// The partition versions are appended to.
pub(crate) const OPEN: u64 = 1;
/// Full: read, not appended to, waiting for collection.
pub(crate) const SEALED: u64 = 2;
/// Being released: a reader waits for the state that follows.
pub(crate) const RELEASING: u64 = 3;
/// Released, its frames freed; the versions long snapshots still needed are in its index.
pub(crate) const INDEXED: u64 = 4;

#[derive(Default)]
pub(crate) struct Gate {
    pub(crate) number: AtomicU64,
    pub(crate) state: AtomicU64,
    pins: AtomicU64,
}

/// What a pin found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pinned {
    /// Pinned, in this state (`OPEN`, `SEALED` or `INDEXED`).
    In(u64),
    /// The slot holds another partition, or none: `number`'s bytes and index are gone.
    Gone,
}

impl Gate {
    /// Pins the slot if it holds partition `number` in one of `states` (a bit per state);
    /// waits out a release in progress. Returns what it found; only `Pinned::In` holds a
    /// pin, which [`Gate::unpin`] drops.
    pub(crate) fn pin(&self, number: u64, states: u64) -> Pinned {
        loop {
            self.pins.fetch_add(1, Ordering::SeqCst);
            crate::sync::fence_seq_cst();
            let state = self.state.load(Ordering::SeqCst);
            if self.number.load(Ordering::SeqCst) == number {
                if states & (1 << state) != 0 {
                    return Pinned::In(state);
                }
                if state == RELEASING {
                    self.unpin();
                    crate::sync::yield_now();
                    continue;
                }
            }
            self.unpin();
            return Pinned::Gone;
        }
    }

    pub(crate) fn unpin(&self) {
        let before = self.pins.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(before > 0, "unpinned more than pinned");
    }

    /// Marks the slot `RELEASING` (from `from`) and waits until no pin is left: afterwards
    /// nothing reads or appends to the partition's bytes, and the caller may free them and
    /// set the next state with [`Gate::finish_release`]. Only the collector, one at a time,
    /// releases.
    pub(crate) fn begin_release(&self, from: u64) {
        let previous = self.state.swap(RELEASING, Ordering::SeqCst);
        debug_assert_eq!(previous, from, "released from the state it was found in");
        crate::sync::fence_seq_cst();
        while self.pins.load(Ordering::SeqCst) != 0 {
            crate::sync::yield_now();
        }
    }

    /// Ends a release: the slot holds the partition `INDEXED`, or (`FREE`) nothing.
    pub(crate) fn finish_release(&self, state: u64) {
        debug_assert!(state == INDEXED || state == FREE);
        debug_assert_eq!(self.state.load(Ordering::SeqCst), RELEASING);
        if state == FREE {
            self.number.store(0, Ordering::SeqCst);
        }
        self.state.store(state, Ordering::SeqCst);
    }
}

/// The bit of `state` in a set of states.
pub(crate) const fn bit(state: u64) -> u64 {
    1 << state
}
