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
    /// Every policy, in the order the lab lists them.
    pub const ALL: [ReplacementPolicy; 2] = [ReplacementPolicy::Clock, ReplacementPolicy::Lru2];

    /// The policy's short name (`clock`, `lru2`), as the lab takes it.
    pub fn name(self) -> &'static str {
        match self {
            ReplacementPolicy::Clock => "clock",
            ReplacementPolicy::Lru2 => "lru2",
        }
    }

    /// The policy named `name` ([`ReplacementPolicy::name`]); the error names them all.
    pub fn from_name(name: &str) -> Result<ReplacementPolicy, String> {
        ReplacementPolicy::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = ReplacementPolicy::ALL.iter().map(|p| p.name()).collect();
                format!("unknown eviction policy {name:?} ({})", names.join(", "))
            })
    }

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
///
/// With LRU-K's correlated reference period (O'Neil, O'Neil and Weikum, §2.1.1): pins of
/// a page less than [`Lru2::correlated_period`] pins after its last one are the same
/// reference (a B+-tree descent and the heap fetch after it, the hint bits set after a
/// read), so only its last pin moves; and a page pinned within that period is not evicted
/// (unless every other frame is refused), so a page is not thrown out between two pins of
/// one operation. Without it, every page an operation touches twice looks as hot as a
/// page used by every transaction, and the pages evicted first are the ones just
/// written, whose log the eviction must sync first (measured on TPC-C: docs/lab-notebook.md).
#[derive(Debug)]
pub(crate) struct Lru2 {
    /// A logical clock, one tick per pin.
    now: u64,
    /// Pins this close to the last one are correlated (the same reference).
    correlated_period: u64,
    /// Per frame: its page's most recent pin (0: none).
    last: Vec<u64>,
    /// Per frame: when its page's most recent uncorrelated reference began (`HIST(p, 1)`;
    /// 0: none).
    first: Vec<u64>,
    /// Per frame: when the reference before it ended, moved by its correlated period as
    /// LRU-K does (`HIST(p, 2)`; 0: none, an infinite backward distance).
    previous: Vec<u64>,
    /// Every frame by eviction order: `(previous, first, frame)`, smallest first: pages
    /// referenced once go first, oldest reference first; then the oldest second reference.
    /// A correlated pin changes neither key, so it costs no reordering.
    order: BTreeSet<(u64, u64, usize)>,
}

impl Lru2 {
    pub(crate) fn new(frames: usize) -> Self {
        Self::with_correlated_period(frames, Self::correlated_period(frames))
    }

    fn with_correlated_period(frames: usize, correlated_period: u64) -> Self {
        assert!(frames > 0, "a buffer pool has at least one frame");
        Lru2 {
            now: 0,
            correlated_period,
            last: vec![0; frames],
            first: vec![0; frames],
            previous: vec![0; frames],
            order: (0..frames).map(|f| (0, 0, f)).collect(),
        }
    }

    /// The correlated reference period, in pins: an eighth of the pool, at most 256 pins
    /// (about one TPC-C transaction's) and at least one.
    fn correlated_period(frames: usize) -> u64 {
        (frames as u64 / 8).clamp(1, 256)
    }

    fn set(&mut self, frame: usize, previous: u64, first: u64) {
        let removed = self
            .order
            .remove(&(self.previous[frame], self.first[frame], frame));
        debug_assert!(removed, "every frame is in the order");
        self.previous[frame] = previous;
        self.first[frame] = first;
        self.order.insert((previous, first, frame));
    }
}

impl Replacement for Lru2 {
    fn loaded(&mut self, frame: usize) {
        self.now += 1;
        // A new page: no history, whatever the frame held before.
        self.set(frame, 0, self.now);
        self.last[frame] = self.now;
    }

    fn accessed(&mut self, frame: usize) {
        self.now += 1;
        let last = self.last[frame];
        self.last[frame] = self.now;
        if self.now - last > self.correlated_period {
            // A new reference: the one before it ended at `last`.
            self.set(frame, last, self.now);
        }
    }

    fn forget(&mut self, frame: usize) {
        self.set(frame, 0, 0);
        self.last[frame] = 0;
    }

    fn victim(&mut self, evictable: &mut dyn FnMut(usize) -> bool) -> Option<usize> {
        let (now, period, last) = (self.now, self.correlated_period, &self.last);
        let settled = |frame: usize| now - last[frame] > period;
        let mut fallback = None;
        for &(_, _, frame) in &self.order {
            if !evictable(frame) {
                continue;
            }
            if settled(frame) {
                return Some(frame);
            }
            fallback.get_or_insert(frame);
        }
        fallback
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
        // No correlated period: every pin is a reference.
        let mut lru = Lru2::with_correlated_period(4, 0);
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

    #[test]
    fn lru2_counts_pins_within_the_correlated_period_as_one_reference_and_keeps_their_page() {
        let mut lru = Lru2::with_correlated_period(4, 2);
        // Frame 3 is pinned to move the clock on.
        let tick = |lru: &mut Lru2, n: usize| (0..n).for_each(|_| lru.accessed(3));
        lru.loaded(1); // t1
        lru.loaded(2); // t2
        lru.loaded(3); // t3
        tick(&mut lru, 2); // t4, t5
        lru.loaded(0); // t6
        lru.accessed(0); // t7: correlated with t6, the same reference
        tick(&mut lru, 3); // t8..t10
        lru.accessed(1); // t11: a second reference of page 1
                         // Page 0 was referenced once (two pins of one reference), page 1 twice: 0 goes.
                         // Were t7 a reference of its own, 0's second reference (t6) would be younger than
                         // 1's (t1) and 1 would go.
        assert_eq!(lru.victim(&mut |f| f <= 1), Some(0));
        lru.accessed(1); // t12: correlated with t11
        lru.loaded(0); // t13: a new page in frame 0, referenced once
        tick(&mut lru, 2); // t14, t15
                           // Page 0 comes first in the order but was pinned within the period (t13): page 1,
                           // last pinned at t12, goes instead.
        assert_eq!(lru.victim(&mut |f| f <= 1), Some(1));
        // Unless no other frame can go.
        assert_eq!(lru.victim(&mut |f| f == 0), Some(0));
    }
}
