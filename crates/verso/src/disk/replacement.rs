//! Which page the buffer pool evicts when it needs a frame: the policy, apart from the
//! pool's mechanism (pins, latches, write-back). The pool calls a policy only under its
//! page-table lock, so a policy is plain single-threaded state.
//!
//! CLOCK is the default (PostgreSQL's is a CLOCK sweep too); LRU-2 (O'Neil, O'Neil and
//! Weikum's LRU-K with K = 2) is the alternative that resists scans. Which one the disk
//! engine uses by default is to be chosen by measurement on TPC-C once it runs it; each
//! policy is one implementation of [`Replacement`].

use std::collections::BTreeSet;
use std::fmt;

/// The buffer pool's eviction policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplacementPolicy {
    /// The CLOCK (second-chance) sweep: a reference bit per frame, set on every access and
    /// cleared by the hand as it passes; the hand evicts the first unpinned frame whose bit
    /// is clear.
    #[default]
    Clock,
    /// LRU-2: evicts the unpinned frame whose page's second most recent access is the
    /// oldest; pages accessed only once since they were loaded go first (oldest last access
    /// first). A scan's pages, touched once each, do not push out pages used again and
    /// again. Without LRU-K's correlated reference period: every pin counts as an access.
    Lru2,
}

impl ReplacementPolicy {
    pub(crate) fn build(self, frames: usize) -> Box<dyn Replacement> {
        match self {
            ReplacementPolicy::Clock => Box::new(Clock::new(frames)),
            ReplacementPolicy::Lru2 => Box::new(Lru2::new(frames)),
        }
    }
}

/// The state of an eviction policy over the pool's frames `0..frames`.
pub(crate) trait Replacement: Send + fmt::Debug {
    /// A page was loaded into the frame (its first access there).
    fn loaded(&mut self, frame: usize);

    /// The frame's page was pinned again (a hit).
    fn accessed(&mut self, frame: usize);

    /// The frame holds no page any more (its load failed).
    fn forget(&mut self, frame: usize);

    /// A frame to evict among those `evictable` accepts (unpinned ones), or `None` if
    /// every frame is refused.
    fn victim(&mut self, evictable: &mut dyn FnMut(usize) -> bool) -> Option<usize>;
}

/// CLOCK: see [`ReplacementPolicy::Clock`].
#[derive(Debug)]
pub(crate) struct Clock {
    referenced: Vec<bool>,
    hand: usize,
}

impl Clock {
    pub(crate) fn new(frames: usize) -> Self {
        assert!(frames > 0, "a buffer pool has at least one frame");
        Clock {
            referenced: vec![false; frames],
            hand: 0,
        }
    }
}

impl Replacement for Clock {
    fn loaded(&mut self, frame: usize) {
        self.referenced[frame] = true;
    }

    fn accessed(&mut self, frame: usize) {
        self.referenced[frame] = true;
    }

    fn forget(&mut self, frame: usize) {
        self.referenced[frame] = false;
    }

    fn victim(&mut self, evictable: &mut dyn FnMut(usize) -> bool) -> Option<usize> {
        let frames = self.referenced.len();
        // Two turns: the first may only clear reference bits; an evictable frame is found
        // in the second unless every frame is refused.
        for _ in 0..2 * frames {
            let frame = self.hand;
            self.hand = (self.hand + 1) % frames;
            if !evictable(frame) {
                continue;
            }
            if std::mem::take(&mut self.referenced[frame]) {
                continue;
            }
            return Some(frame);
        }
        None
    }
}

/// LRU-2: see [`ReplacementPolicy::Lru2`].
#[derive(Debug)]
pub(crate) struct Lru2 {
    /// A logical clock, one tick per access.
    now: u64,
    /// Per frame: its page's most recent access (0: none).
    last: Vec<u64>,
    /// Per frame: its page's access before the last (0: none: infinite backward distance).
    previous: Vec<u64>,
    /// Every frame by eviction order: `(previous, last, frame)`, smallest first.
    order: BTreeSet<(u64, u64, usize)>,
}

impl Lru2 {
    pub(crate) fn new(frames: usize) -> Self {
        assert!(frames > 0, "a buffer pool has at least one frame");
        Lru2 {
            now: 0,
            last: vec![0; frames],
            previous: vec![0; frames],
            order: (0..frames).map(|f| (0, 0, f)).collect(),
        }
    }

    fn set(&mut self, frame: usize, previous: u64, last: u64) {
        let removed = self
            .order
            .remove(&(self.previous[frame], self.last[frame], frame));
        debug_assert!(removed, "every frame is in the order");
        self.previous[frame] = previous;
        self.last[frame] = last;
        self.order.insert((previous, last, frame));
    }
}

impl Replacement for Lru2 {
    fn loaded(&mut self, frame: usize) {
        self.now += 1;
        // A new page: no history, whatever the frame held before.
        self.set(frame, 0, self.now);
    }

    fn accessed(&mut self, frame: usize) {
        self.now += 1;
        let last = self.last[frame];
        self.set(frame, last, self.now);
    }

    fn forget(&mut self, frame: usize) {
        self.set(frame, 0, 0);
    }

    fn victim(&mut self, evictable: &mut dyn FnMut(usize) -> bool) -> Option<usize> {
        self.order
            .iter()
            .map(|&(_, _, frame)| frame)
            .find(|&frame| evictable(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_gives_a_referenced_frame_a_second_chance_and_skips_refused_frames() {
        let mut clock = Clock::new(3);
        clock.loaded(0);
        clock.accessed(2);
        // Frame 0 is referenced (cleared, passed), 1 is not: 1 goes.
        assert_eq!(clock.victim(&mut |_| true), Some(1));
        // The hand is at 2: referenced, cleared; 0 was cleared on the first pass: 0 goes.
        assert_eq!(clock.victim(&mut |_| true), Some(0));
        // Frame 2 refused (pinned): 1 is next.
        assert_eq!(clock.victim(&mut |f| f != 2), Some(1));
        assert_eq!(clock.victim(&mut |_| false), None);
        clock.accessed(1);
        clock.forget(1);
        assert_eq!(clock.victim(&mut |f| f == 1), Some(1));
    }

    #[test]
    fn lru2_keeps_pages_used_twice_through_a_scan_of_pages_used_once() {
        let mut lru = Lru2::new(4);
        // Frames 0 and 1 hold hot pages, used twice; 2 and 3 take a scan's pages in turn.
        for frame in [0, 1] {
            lru.loaded(frame);
            lru.accessed(frame);
        }
        lru.loaded(2);
        lru.loaded(3);
        for _ in 0..10 {
            let victim = lru.victim(&mut |_| true).unwrap();
            assert!(
                victim == 2 || victim == 3,
                "a hot page was evicted: {victim}"
            );
            lru.loaded(victim);
        }
        // The oldest second access goes first once every frame has two; pinned frames
        // are skipped.
        lru.accessed(2);
        lru.accessed(3);
        assert_eq!(lru.victim(&mut |_| true), Some(0));
        assert_eq!(lru.victim(&mut |f| f != 0), Some(1));
        lru.forget(3);
        assert_eq!(lru.victim(&mut |_| true), Some(3));
        assert_eq!(lru.victim(&mut |_| false), None);
    }
}
