//! OneShot's collection over the delta-nvm storage (the mechanism; the policy, which of
//! TB §4.4's three cases a partition is in, is `gc/oneshot.rs`): after a transaction ends
//! on a thread, and in `collect_garbage`, the oldest sealed partitions are released whole,
//! or released after their index is built, in number order (P2); indexes no snapshot can
//! need any more are freed.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{old_bytes, OLD_LINK_PART, OLD_META};
use super::{DeltaStore, ABORTED, EXISTS, OLD_BEGIN, OLD_END, OLD_HEADER, OLD_LINK_AT};
use crate::gc::oneshot::{classify, writer_running, PartitionCase};
use crate::pmem::version_index::{Indexed, VersionIndex};
use crate::version::ActiveSnapshots;

/// A sealed partition's bounds (final once its appends are done, P1).
fn bounds(slot: &super::partitions::Partition) -> (u64, u64) {
    (
        slot.min_end.load(Ordering::SeqCst),
        slot.max_end.load(Ordering::SeqCst),
    )
}

impl DeltaStore {
    /// One collection: returns whether it released or freed anything. With `everything`
    /// (`collect_garbage`) the open partition is sealed first, if it holds a version, so
    /// that all that is safe to release is.
    pub(crate) fn collect(
        self: &Arc<Self>,
        everything: bool,
        active: &dyn Fn() -> ActiveSnapshots,
    ) -> bool {
        let partitions = &self.partitions;
        if everything {
            let current = partitions.current.load(Ordering::SeqCst);
            if partitions.slot(current).versions.load(Ordering::Relaxed) > 0 {
                let _ = partitions.rotate(current);
            }
        }
        let Ok(mut waiting) = partitions.waiting.try_lock() else {
            return false;
        };
        if waiting.0.is_empty() && waiting.1.is_empty() {
            return false;
        }
        let active = active();
        let mut did = false;
        self.with_appender(|appender| {
            let writer = &mut appender.writer;
            // Indexes first: one whose partition no snapshot can read any more goes.
            waiting.1.retain(|&number| {
                let slot = partitions.slot(number);
                if classify(bounds(slot), &active) != PartitionCase::Release {
                    return true;
                }
                let _ = partitions.free_index(&self.space, writer, number);
                did = true;
                false
            });
            while let Some(&number) = waiting.0.front() {
                let slot = partitions.slot(number);
                slot.wait_for_appends();
                let index = match classify(bounds(slot), &active) {
                    PartitionCase::Keep => break,
                    PartitionCase::Release => None,
                    PartitionCase::IndexAndRelease { readers } => {
                        match self.build_index(writer, number, &readers) {
                            Ok(Some(index)) => index,
                            // A writer of it runs, or no room for the index: it waits.
                            Ok(None) | Err(_) => break,
                        }
                    }
                };
                let indexed = index.is_some();
                let _ = partitions.release(&self.space, writer, number, index);
                waiting.0.pop_front();
                partitions.sealed_waiting.fetch_sub(1, Ordering::SeqCst);
                if indexed {
                    waiting.1.push_back(number);
                }
                did = true;
            }
        });
        drop(waiting);
        did
    }

    /// The index of sealed partition `number` for the `readers` (ascending active starts,
    /// each at or below its `max`): a copy of each version one of them reads, a stub for
    /// each one of them walks past (`version_index.rs`); `Some(None)` when no version needs
    /// an entry (release it whole), `None` when a writer of it still runs (keep it).
    fn build_index(
        &self,
        writer: &mut crate::pmem::LineWriter,
        number: u64,
        readers: &[u64],
    ) -> crate::error::Result<Option<Option<VersionIndex>>> {
        debug_assert!(readers.windows(2).all(|w| w[0] < w[1]));
        let slot = self.partitions.slot(number);
        let mut versions = Vec::new();
        for (first, used) in slot.frames() {
            let mut at = first;
            while at < first + used {
                let meta = self.word(at + OLD_META);
                let len = (meta & 0xFFFF_FFFF) as usize;
                let next = at + old_bytes(len);
                debug_assert!(next <= first + used, "records are whole (P1)");
                if meta & ABORTED == 0 {
                    let begin = self.word(at + OLD_BEGIN);
                    let end = self.word(at + OLD_END);
                    if writer_running(end, readers) {
                        return Ok(None);
                    }
                    // The oldest reader above `begin`: it reads the version if it is not
                    // above `end`; any reader at or below `begin` walks past it.
                    let above = readers.partition_point(|&start| start <= begin);
                    let read = readers.get(above).is_some_and(|&start| start <= end);
                    let passed = above > 0;
                    if read || passed {
                        versions.push(Indexed {
                            at,
                            begin,
                            end,
                            link: (self.word(at + OLD_LINK_PART), self.word(at + OLD_LINK_AT)),
                            exists: meta & EXISTS != 0,
                            len,
                            // The partition is sealed and its appends are done (P1); the
                            // collector holds `waiting`, so nothing releases it meanwhile.
                            contents: read.then(|| self.bytes(at + OLD_HEADER, len)),
                        });
                    }
                }
                at = next;
            }
        }
        if versions.is_empty() {
            return Ok(Some(None));
        }
        VersionIndex::build(&self.space, writer, &versions).map(|index| Some(Some(index)))
    }
}
