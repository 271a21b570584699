//! Loom model checks of the epoch collectors' reclaim bounds: a transaction enters an
//! epoch and takes its start while another thread commits, advances the epoch and computes
//! reclaim bounds, in every interleaving. The property (the collectors' invariant, see
//! `gc/mod.rs`): every bound computed while the transaction runs, or before it begins, is
//! at most its start, so finalizing with it never unlinks a version the transaction reads.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p verso --lib --release loom`.
//!
//! One thread slot is modelled by one atomic (the engine's `Slot::collector_value`); the
//! commit clock is one atomic.

use std::sync::atomic::Ordering;

use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;

use super::deuteronomy::InfiniteEpochs;
use super::ermia::ThreePhaseEpochs;
use super::txn_epochs::EpochCounters;

const NOTHING: u64 = u64::MAX;

/// A committer: draws a commit timestamp, advances, and computes a bound, twice.
fn committer_rounds(rounds: usize, mut round: impl FnMut() -> u64) -> Vec<u64> {
    (0..rounds).map(|_| round()).collect()
}

#[test]
fn loom_three_phase_epoch_bound_never_passes_a_running_start() {
    loom::model(|| {
        let epochs = Arc::new(ThreePhaseEpochs::new());
        let clock = Arc::new(AtomicU64::new(1));
        let published = Arc::new(AtomicU64::new(NOTHING));

        let committer = {
            let (epochs, clock, published) = (
                Arc::clone(&epochs),
                Arc::clone(&clock),
                Arc::clone(&published),
            );
            thread::spawn(move || {
                committer_rounds(2, || {
                    clock.fetch_add(1, Ordering::SeqCst);
                    epochs.try_advance(
                        || clock.load(Ordering::SeqCst),
                        || published.load(Ordering::SeqCst),
                    );
                    epochs.reclaim_bound()
                })
            })
        };

        // The transaction: enter, then take the start.
        let epoch = epochs.enter(
            |epoch| published.store(epoch, Ordering::SeqCst),
            || published.store(NOTHING, Ordering::SeqCst),
        );
        let start = clock.load(Ordering::SeqCst);
        assert!(start >= epochs.started_at(epoch));
        let bound_while_running = epochs.reclaim_bound();

        let bounds = committer.join().expect("committer");
        assert!(bound_while_running <= start);
        for bound in bounds {
            assert!(bound <= start, "bound {bound} passed the start {start}");
        }
    });
}

#[test]
fn loom_infinite_epoch_bound_never_passes_a_running_start() {
    loom::model(|| {
        let epochs = Arc::new(InfiniteEpochs::new());
        let clock = Arc::new(AtomicU64::new(1));
        let published = Arc::new(AtomicU64::new(NOTHING));

        let committer = {
            let (epochs, clock, published) = (
                Arc::clone(&epochs),
                Arc::clone(&clock),
                Arc::clone(&published),
            );
            thread::spawn(move || {
                committer_rounds(2, || {
                    clock.fetch_add(1, Ordering::SeqCst);
                    epochs.advance(clock.load(Ordering::SeqCst));
                    epochs.reclaim_bound(|| published.load(Ordering::SeqCst))
                })
            })
        };

        let epoch = epochs.enter(|epoch| published.store(epoch, Ordering::SeqCst));
        let start = clock.load(Ordering::SeqCst);
        assert!(start >= epoch);

        let bounds = committer.join().expect("committer");
        for bound in bounds {
            assert!(bound <= start, "bound {bound} passed the start {start}");
        }
    });
}

/// 'txn': a transaction registers in an epoch (counter), takes its start, and leaves,
/// while the GC thread advances the epoch and computes the bound, around a ring of two
/// cells so that cells are reused. Every bound computed before the transaction leaves is
/// at most its start.
#[test]
fn loom_epoch_counter_bound_never_passes_a_running_start() {
    loom::model(|| {
        let epochs = Arc::new(EpochCounters::with_ring(2));
        let clock = Arc::new(AtomicU64::new(1));
        let left = Arc::new(AtomicU64::new(0));

        let gc = {
            let (epochs, clock, left) =
                (Arc::clone(&epochs), Arc::clone(&clock), Arc::clone(&left));
            thread::spawn(move || {
                committer_rounds(3, || {
                    clock.fetch_add(1, Ordering::SeqCst);
                    epochs.advance(clock.load(Ordering::SeqCst));
                    let bound = epochs.reclaim_bound();
                    // Bounds after the transaction left do not concern it.
                    if left.load(Ordering::SeqCst) == 1 {
                        0
                    } else {
                        bound
                    }
                })
            })
        };

        let epoch = epochs.enter();
        let start = clock.load(Ordering::SeqCst);
        assert!(start >= epochs.started_at(epoch));
        let bound_while_running = epochs.reclaim_bound();
        assert!(bound_while_running <= start);
        left.store(1, Ordering::SeqCst);
        epochs.leave(epoch);

        let bounds = gc.join().expect("gc thread");
        for bound in bounds {
            assert!(bound <= start, "bound {bound} passed the start {start}");
        }
    });
}
