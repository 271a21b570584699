//! Loom model checks of the row words of MVTO and MV2PL: a read and a write of one row
//! racing in every interleaving. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p verso --lib --release loom`.

use loom::sync::Arc;
use loom::thread;

use super::{mv2pl, mvto};
use crate::sync::AtomicU64;

/// MVTO: a younger reader (id 5) and an older writer (id 3) race on a fresh row. Both
/// compare-and-swap one word, so exactly one gets through: the reader first leaves a read
/// timestamp the writer must refuse; the writer first leaves a lock the reader must refuse.
#[test]
fn loom_mvto_a_younger_read_and_an_older_write_of_one_row_never_both_succeed() {
    loom::model(|| {
        let word = Arc::new(AtomicU64::new(0));
        let reader = {
            let word = Arc::clone(&word);
            thread::spawn(move || mvto::stamp_read(&word, 5))
        };
        let written = mvto::lock(&word, 3);
        let read = reader.join().unwrap();
        match (read, written) {
            (Ok(()), Err(mvto::Refusal::ReadByYounger)) => {}
            (Err(mvto::Refusal::Locked), Ok(())) => mvto::unlock(&word, 3),
            other => panic!("exactly one of the read and the write goes ahead: {other:?}"),
        }
    });
}

/// MVTO: two writers race for one row's lock; exactly one gets it.
#[test]
fn loom_mvto_two_writers_never_both_hold_the_lock() {
    loom::model(|| {
        let word = Arc::new(AtomicU64::new(0));
        let other = {
            let word = Arc::clone(&word);
            thread::spawn(move || mvto::lock(&word, 4))
        };
        let mine = mvto::lock(&word, 3);
        let theirs = other.join().unwrap();
        assert!(
            mine.is_ok() != theirs.is_ok(),
            "exactly one lock: {mine:?} {theirs:?}"
        );
    });
}

/// MV2PL: a reader and a writer race on a free row; never both hold their locks, and one
/// of them does.
#[test]
fn loom_mv2pl_a_read_lock_and_a_write_lock_of_one_row_never_coexist() {
    loom::model(|| {
        let word = Arc::new(AtomicU64::new(0));
        let reader = {
            let word = Arc::clone(&word);
            thread::spawn(move || mv2pl::read_lock(&word))
        };
        let written = mv2pl::write_lock(&word, false);
        let read = reader.join().unwrap();
        match (read, written) {
            (Ok(()), Err(mv2pl::Refusal::ReadLocked)) => mv2pl::read_unlock(&word),
            (Err(mv2pl::Refusal::WriteLocked), Ok(())) => mv2pl::write_unlock(&word),
            other => panic!("exactly one lock: {other:?}"),
        }
        assert_eq!(word.load(std::sync::atomic::Ordering::SeqCst), 0);
    });
}

/// MV2PL: two readers of one row both try to upgrade; neither may (the other's read lock
/// is held), and both read locks stay counted.
#[test]
fn loom_mv2pl_two_readers_never_both_upgrade() {
    loom::model(|| {
        let word = Arc::new(AtomicU64::new(0));
        mv2pl::read_lock(&word).unwrap();
        mv2pl::read_lock(&word).unwrap();
        let other = {
            let word = Arc::clone(&word);
            thread::spawn(move || mv2pl::write_lock(&word, true))
        };
        let mine = mv2pl::write_lock(&word, true);
        let theirs = other.join().unwrap();
        assert_eq!(mine, Err(mv2pl::Refusal::ReadLocked));
        assert_eq!(theirs, Err(mv2pl::Refusal::ReadLocked));
        assert_eq!(word.load(std::sync::atomic::Ordering::SeqCst), 2);
    });
}
