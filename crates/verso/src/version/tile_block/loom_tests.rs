//! Loom model check of the freeze's Dekker pair (`may_cover` against `freeze`, design note
//! "Block-level collection"): a writer covers a version in a block while a collection
//! freezes the block, takes its list of active snapshots and reads the block's bounds, in
//! every interleaving. The property: if the writer covered the version (so it may still
//! abort and restore it into the block), no collection frees the block while the writer
//! runs. Run with `RUSTFLAGS="--cfg loom" cargo test -p verso --lib --release loom`.
//!
//! The writer's slot is one atomic (its published start, or nothing), as in the engine.

use std::sync::atomic::Ordering;

use loom::sync::atomic::{AtomicBool, AtomicU64};
use loom::sync::Arc;
use loom::thread;

use super::{block_state, freeze, may_cover};
use crate::gc::tb_collect::{classify, BlockCase};
use crate::version::ActiveSnapshots;

const NOTHING: u64 = u64::MAX;

#[test]
fn loom_a_writer_that_covers_a_version_keeps_its_block_from_being_freed() {
    loom::model(|| {
        // A sealed block of versions written by transactions 2..=4, queued for collection;
        // the writer is transaction 6 (already begun: its start is published), the clock
        // is past it.
        let (min, writer_id, horizon) = (2, 6, 8);
        let max_txnid = Arc::new(AtomicU64::new(4));
        let state = Arc::new(AtomicU64::new(block_state::QUEUED));
        let published = Arc::new(AtomicU64::new(writer_id));
        let freed = Arc::new(AtomicBool::new(false));

        let writer = {
            let (max_txnid, state, published, freed) = (
                Arc::clone(&max_txnid),
                Arc::clone(&state),
                Arc::clone(&published),
                Arc::clone(&freed),
            );
            thread::spawn(move || {
                if may_cover(&max_txnid, &state, writer_id) {
                    // Covered; now it aborts and restores the version into the block,
                    // which must still be there.
                    assert!(
                        !freed.load(Ordering::SeqCst),
                        "the block was freed under a running writer that covered a version"
                    );
                }
                published.store(NOTHING, Ordering::SeqCst); // the writer ends
            })
        };

        freeze(&state);
        let start = published.load(Ordering::SeqCst);
        let starts = if start == NOTHING {
            vec![]
        } else {
            vec![start]
        };
        let active = ActiveSnapshots::new(horizon, starts);
        let case = classify(min, max_txnid.load(Ordering::SeqCst), &active);
        if case != BlockCase::Keep {
            freed.store(true, Ordering::SeqCst);
        }
        writer.join().unwrap();
    });
}
