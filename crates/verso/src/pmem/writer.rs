//! The line-tracking writer: every store to the region goes through one, so that the lines
//! a persist point makes durable, and the media bytes they cost, are counted exactly.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Purpose, Region, WriterCounters};
use crate::error::Result;

/// What one persist point did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PersistReport {
    /// Distinct lines made durable.
    pub lines: u64,
    /// Nanoseconds spent in the emulated per-line delay.
    pub line_delay_nanos: u64,
}

/// One thread's way to store into a [`Region`]: it writes the bytes, remembers the lines
/// they touched, and makes those lines durable at [`LineWriter::persist`].
///
/// Stores are relaxed atomic word stores: another thread sees them once something it
/// acquires was released after them (a published slot count, say), and the crash model
/// keeps each word of them whole or not at all. A store of bytes that share a word with
/// bytes another thread stores at the same time keeps both (the partial word is merged by
/// compare-and-swap).
#[derive(Debug)]
pub struct LineWriter {
    region: Arc<Region>,
    counters: Arc<WriterCounters>,
    /// Lines dirtied since the last persist point, each with the purpose that dirtied it,
    /// in the order they were dirtied. May repeat a line; `persist` deduplicates.
    dirty: Vec<(u64, Purpose)>,
}

impl LineWriter {
    pub(super) fn new(region: Arc<Region>, counters: Arc<WriterCounters>) -> LineWriter {
        LineWriter {
            region,
            counters,
            dirty: Vec::new(),
        }
    }

    /// The region this writer stores into.
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// Stores `bytes` at region offset `at` (any offset and length) and marks the lines
    /// they touch dirty for `purpose`.
    ///
    /// # Panics
    /// If the bytes do not lie inside the region.
    pub fn store(&mut self, at: u64, bytes: &[u8], purpose: Purpose) {
        self.region.check_range(at, bytes.len());
        self.count_logical(purpose, bytes.len() as u64);
        if bytes.is_empty() {
            return;
        }
        self.mark(at, bytes.len() as u64, purpose);
        for super::WordPiece {
            word_at,
            skip,
            take,
            done,
        } in super::word_pieces(at, bytes.len())
        {
            let word = self.region.word(word_at);
            if take == 8 {
                let value = u64::from_le_bytes(bytes[done..done + 8].try_into().expect("8 bytes"));
                word.store(value, Ordering::Relaxed);
            } else {
                // A partial word: replace only our bytes, keeping what another thread may be
                // storing into the rest of the word.
                let mut new_bytes = [0u8; 8];
                new_bytes[skip..skip + take].copy_from_slice(&bytes[done..done + take]);
                merge_bytes(word, mask_of(skip, take), u64::from_le_bytes(new_bytes));
            }
        }
    }

    /// Stores `value` in the word at `at` (8-aligned) with release ordering.
    ///
    /// # Panics
    /// If `at` is not an aligned word inside the region.
    #[inline]
    pub fn store_u64(&mut self, at: u64, value: u64, purpose: Purpose) {
        self.region.word(at).store(value, Ordering::Release);
        self.touched_word(at, purpose);
    }

    /// `word |= mask` on the word at `at`; returns the word before. Acquire-release.
    #[inline]
    pub fn fetch_or_u64(&mut self, at: u64, mask: u64, purpose: Purpose) -> u64 {
        self.word_op(at, purpose, |word| word.fetch_or(mask, Ordering::AcqRel))
    }

    /// `word &= mask` on the word at `at`; returns the word before. Acquire-release.
    #[inline]
    pub fn fetch_and_u64(&mut self, at: u64, mask: u64, purpose: Purpose) -> u64 {
        self.word_op(at, purpose, |word| word.fetch_and(mask, Ordering::AcqRel))
    }

    /// `word = max(word, value)` on the word at `at`; returns the word before.
    #[inline]
    pub fn fetch_max_u64(&mut self, at: u64, value: u64, purpose: Purpose) -> u64 {
        self.word_op(at, purpose, |word| word.fetch_max(value, Ordering::AcqRel))
    }

    /// `word = min(word, value)` on the word at `at`; returns the word before.
    #[inline]
    pub fn fetch_min_u64(&mut self, at: u64, value: u64, purpose: Purpose) -> u64 {
        self.word_op(at, purpose, |word| word.fetch_min(value, Ordering::AcqRel))
    }

    /// Replaces the word at `at` with `new` if it is `current`; returns what it was. The
    /// line is dirtied (and the 8 bytes counted) only when the swap happened: a failed
    /// compare-and-swap stores nothing. (The `fetch_*` operations always store, even a value
    /// equal to the old one, so they always dirty their line.)
    #[inline]
    pub fn compare_exchange_u64(
        &mut self,
        at: u64,
        current: u64,
        new: u64,
        purpose: Purpose,
    ) -> std::result::Result<u64, u64> {
        let outcome = self.region.word(at).compare_exchange(
            current,
            new,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if outcome.is_ok() {
            self.touched_word(at, purpose);
        }
        outcome
    }

    /// Distinct lines dirtied since the last persist point.
    pub fn dirty_lines(&self) -> usize {
        let mut lines: Vec<u64> = self.dirty.iter().map(|&(line, _)| line).collect();
        lines.sort_unstable();
        lines.dedup();
        lines.len()
    }

    /// The persist point: makes every line this writer dirtied since its last persist point
    /// durable, counts them (once each, for the purpose that dirtied them first), and spins
    /// the emulated delay. A persist point with nothing dirty does nothing and counts
    /// nothing.
    ///
    /// On an error nothing is counted and the lines stay dirty, and the region refuses every
    /// later persist point with [`crate::Error::DurabilityLost`]: a later persist that
    /// succeeded would not make the failed one's stores durable on every backend.
    pub fn persist(&mut self) -> Result<PersistReport> {
        if self.dirty.is_empty() {
            return Ok(PersistReport::default());
        }
        // Stable: for each line the first entry, the purpose that dirtied it first, stays.
        self.dirty.sort_by_key(|&(line, _)| line);
        self.dirty.dedup_by_key(|&mut (line, _)| line);
        let lines: Vec<u64> = self.dirty.iter().map(|&(line, _)| line).collect();
        self.region.persist_lines(&lines)?;
        let delay = self
            .region
            .line_delay()
            .saturating_mul(lines.len().try_into().unwrap_or(u32::MAX));
        let line_delay_nanos = if delay > Duration::ZERO {
            // The emulated media's write time, spun at the fence where a program waits for
            // it, after the backend's own work (which it does not include).
            let started = Instant::now();
            while started.elapsed() < delay {
                std::hint::spin_loop();
            }
            started.elapsed().as_nanos() as u64
        } else {
            0
        };
        for &(_, purpose) in &self.dirty {
            WriterCounters::bump(&self.counters.lines_persisted[purpose.index()], 1);
        }
        WriterCounters::bump(&self.counters.persist_points, 1);
        WriterCounters::bump(&self.counters.line_delay_nanos, line_delay_nanos);
        self.dirty.clear();
        Ok(PersistReport {
            lines: lines.len() as u64,
            line_delay_nanos,
        })
    }

    fn count_logical(&self, purpose: Purpose, bytes: u64) {
        WriterCounters::bump(&self.counters.logical_bytes[purpose.index()], bytes);
    }

    /// A read-modify-write of the word at `at`, which dirties its line; returns the word
    /// before.
    #[inline]
    fn word_op(
        &mut self,
        at: u64,
        purpose: Purpose,
        op: impl FnOnce(&std::sync::atomic::AtomicU64) -> u64,
    ) -> u64 {
        let before = op(self.region.word(at));
        self.touched_word(at, purpose);
        before
    }

    fn touched_word(&mut self, at: u64, purpose: Purpose) {
        self.count_logical(purpose, 8);
        self.mark(at, 8, purpose);
    }

    /// Marks the lines of `len` (> 0) bytes at `at` dirty for `purpose`.
    #[inline]
    fn mark(&mut self, at: u64, len: u64, purpose: Purpose) {
        debug_assert!(len > 0);
        let line = self.region.line_size();
        let (first, last) = (line.line_of(at), line.line_of(at + len - 1));
        for l in first..=last {
            // Consecutive stores into one line (a record written field by field) are the
            // common case: skip the repeat here rather than sort it away later.
            if self.dirty.last().is_none_or(|&(previous, _)| previous != l) {
                self.dirty.push((l, purpose));
            }
        }
    }
}

/// A word whose bytes can be merged (`std`'s atomic, and loom's in the model checks).
trait MergeableWord {
    fn load_relaxed(&self) -> u64;
    fn compare_exchange_weak_relaxed(
        &self,
        current: u64,
        new: u64,
    ) -> std::result::Result<u64, u64>;
}

impl MergeableWord for std::sync::atomic::AtomicU64 {
    fn load_relaxed(&self) -> u64 {
        self.load(Ordering::Relaxed)
    }
    fn compare_exchange_weak_relaxed(
        &self,
        current: u64,
        new: u64,
    ) -> std::result::Result<u64, u64> {
        self.compare_exchange_weak(current, new, Ordering::Relaxed, Ordering::Relaxed)
    }
}

#[cfg(loom)]
impl MergeableWord for loom::sync::atomic::AtomicU64 {
    fn load_relaxed(&self) -> u64 {
        self.load(Ordering::Relaxed)
    }
    fn compare_exchange_weak_relaxed(
        &self,
        current: u64,
        new: u64,
    ) -> std::result::Result<u64, u64> {
        self.compare_exchange_weak(current, new, Ordering::Relaxed, Ordering::Relaxed)
    }
}

/// Replaces the bytes of `word` under the mask `ours` with those of `new_part` (zero outside
/// the mask), keeping the word's other bytes even while other threads merge theirs.
fn merge_bytes(word: &impl MergeableWord, ours: u64, new_part: u64) {
    debug_assert_eq!(new_part & !ours, 0);
    let mut current = word.load_relaxed();
    loop {
        let merged = (current & !ours) | new_part;
        match word.compare_exchange_weak_relaxed(current, merged) {
            Ok(_) => break,
            Err(seen) => current = seen,
        }
    }
}

impl Drop for LineWriter {
    /// Folds the writer's counts into the region's retired total, so that the region keeps
    /// no record per writer it ever had.
    fn drop(&mut self) {
        self.region.retire(&self.counters);
    }
}

/// The mask of `take` bytes from byte `skip` of a little-endian word.
fn mask_of(skip: usize, take: usize) -> u64 {
    debug_assert!(take > 0 && skip + take <= 8);
    let bits = if take == 8 {
        u64::MAX
    } else {
        (1u64 << (take * 8)) - 1
    };
    bits << (skip * 8)
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;

    /// Two threads store into disjoint bytes of one word of the region at once (the tails
    /// of two records sharing a word): in every interleaving (loom 0.7 never fails a weak
    /// compare-and-swap spuriously, so the failures explored are those a racing store
    /// causes), both threads' bytes end up in the word and nothing else changes.
    #[test]
    fn loom_partial_word_stores_of_two_threads_keep_both() {
        loom::model(|| {
            let word = Arc::new(AtomicU64::new(0x1111_1111_1111_1111));
            let other = Arc::clone(&word);
            let t = loom::thread::spawn(move || merge_bytes(&*other, mask_of(0, 3), 0x00AA_BBCC));
            merge_bytes(&*word, mask_of(5, 2), 0x00DD_EE00_0000_0000);
            t.join().unwrap();
            assert_eq!(word.load(Ordering::Relaxed), 0x11DD_EE11_11AA_BBCC);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_cover_exactly_the_bytes_taken() {
        assert_eq!(mask_of(0, 8), u64::MAX);
        assert_eq!(mask_of(0, 1), 0xFF);
        assert_eq!(mask_of(7, 1), 0xFF << 56);
        assert_eq!(mask_of(2, 3), 0xFF_FFFF << 16);
    }
}
