//! Loom model check of invariant N1 of the append-nvm storage (`mod.rs`): a slot is freed
//! only under the exclusive latch of the row that linked it, after it was unlinked, and is
//! then reused at once by another row's writer with no grace period. The property: a
//! reader holding its row's latch never sees a slot's contents change under it, whatever
//! the interleaving of the reader, a writer of the same row that covers and frees the
//! version (as `tvcp` prunes at commit), and a writer of another row that takes the slot
//! from the reuse list and stores into it. The row latch is the engine's (`sync::Latch`);
//! the slots and the reuse list are modelled by atomics and a mutex (the region's words
//! are atomics too). Run with `RUSTFLAGS="--cfg loom" cargo test -p verso --lib --release
//! loom`.

use std::sync::atomic::Ordering;

use loom::sync::atomic::AtomicU64;
use loom::sync::{Arc, Mutex};
use loom::thread;

use crate::sync::Latch;

/// A slot's contents: which row's version it holds, and which version.
fn tag(row: u64, version: u64) -> u64 {
    row << 32 | version
}

struct Model {
    /// Two words per slot (a version is stored as more than one word).
    slots: [[AtomicU64; 2]; 3],
    reuse: Mutex<Vec<usize>>,
    /// Row A: its newest version's slot and the version behind it, under its latch.
    row_a: Latch<(usize, Option<usize>)>,
}

fn store(model: &Model, slot: usize, value: u64) {
    for word in &model.slots[slot] {
        word.store(value, Ordering::Release);
    }
}

#[test]
fn loom_a_slot_freed_under_its_rows_latch_is_never_read_while_reused() {
    loom::model(|| {
        // Row A holds version 1 in slot 0 and, behind it, version 0 in slot 1; slot 2 is
        // free in another size class (unused here).
        let model = Arc::new(Model {
            slots: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            reuse: Mutex::new(Vec::new()),
            row_a: Latch::new((0, Some(1))),
        });
        store(&model, 0, tag(1, 1));
        store(&model, 1, tag(1, 0));

        // A reader of an old snapshot walks row A to the version behind the newest.
        let reader = {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                let chain = model.row_a.read();
                let (newest, behind) = *chain;
                for slot in std::iter::once(newest).chain(behind) {
                    let first = model.slots[slot][0].load(Ordering::Acquire);
                    let second = model.slots[slot][1].load(Ordering::Acquire);
                    assert_eq!(first >> 32, 1, "a slot row A links holds row A's version");
                    assert_eq!(first, second, "the contents changed under a reader");
                }
            })
        };
        // The collector, on row A: the version behind is unlinked, then freed, under the
        // row's exclusive latch.
        let pruner = {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                let mut chain = model.row_a.write();
                if let Some(behind) = chain.1.take() {
                    model.reuse.lock().unwrap().push(behind);
                }
                drop(chain);
            })
        };
        // A writer of row B takes a slot from the reuse list, if one is there, and stores
        // its version into it (under row B's latch, which no one else takes here).
        let other_row = {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                let taken = model.reuse.lock().unwrap().pop();
                if let Some(slot) = taken {
                    store(&model, slot, tag(2, 0));
                }
            })
        };
        reader.join().unwrap();
        pruner.join().unwrap();
        other_row.join().unwrap();
    });
}
