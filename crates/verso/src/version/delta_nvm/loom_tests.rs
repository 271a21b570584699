//! Loom model check of the partition gate (`gate.rs`, invariant D2 of `mod.rs`): a reader
//! that pinned a partition's slot while it held the partition never sees the partition's
//! bytes freed or reused under its pin, whatever the interleaving of the reader, the
//! collector that releases the partition (marks it releasing, waits for no pin, frees its
//! bytes, leaves the slot free) and the rotation that reuses the slot for a newer
//! partition. The bytes are modelled by an atomic word (the region's words are atomics
//! too). Run with `RUSTFLAGS="--cfg loom" cargo test -p verso --lib --release loom`.

use std::sync::atomic::Ordering;

use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;

use super::gate::{self, Gate, Pinned};

/// What the partition's bytes hold: the partition's number while it owns them, 0 once freed
/// or the newer partition's number once reused.
struct Model {
    gate: Gate,
    bytes: AtomicU64,
}

const OLD: u64 = 7;
const NEW: u64 = 7 + 64;

#[test]
fn loom_a_pinned_partition_is_never_freed_or_reused_under_its_reader() {
    loom::model(|| {
        let model = Arc::new(Model {
            gate: Gate::default(),
            bytes: AtomicU64::new(OLD),
        });
        model.gate.number.store(OLD, Ordering::SeqCst);
        model.gate.state.store(gate::SEALED, Ordering::SeqCst);

        let reader = {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                let states =
                    gate::bit(gate::OPEN) | gate::bit(gate::SEALED) | gate::bit(gate::INDEXED);
                if let Pinned::In(_) = model.gate.pin(OLD, states) {
                    // Read twice under the pin: the bytes are the partition's both times.
                    assert_eq!(model.bytes.load(Ordering::Acquire), OLD);
                    thread::yield_now();
                    assert_eq!(model.bytes.load(Ordering::Acquire), OLD);
                    model.gate.unpin();
                }
            })
        };
        // The collector releases the partition, then the rotation reuses the slot.
        model.gate.begin_release(gate::SEALED);
        model.bytes.store(0, Ordering::Release);
        model.gate.finish_release(gate::FREE);
        model.gate.number.store(NEW, Ordering::SeqCst);
        model.bytes.store(NEW, Ordering::Release);
        model.gate.state.store(gate::OPEN, Ordering::SeqCst);
        reader.join().unwrap();
    });
}
