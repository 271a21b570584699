//! Loom model checks of the B+-tree's latch coupling: two writers whose entries do not fit
//! in the one leaf there is, so one or both split it and the root, in every interleaving;
//! and a reader beside a splitting writer. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p verso --lib --release loom`.

use std::path::Path;
use std::sync::Mutex;

use loom::sync::Arc;
use loom::thread;

use super::BTree;
use crate::disk::loom_tests::MemoryFile;
use crate::disk::{BufferPool, FileNo, ReplacementPolicy, Unlogged};

/// Large enough that four fill a leaf and a fifth splits it.
const VALUE: usize = 1900;

fn tree_with_a_full_leaf() -> BTree {
    let pool = BufferPool::new(8, ReplacementPolicy::Clock, std::sync::Arc::new(Unlogged));
    let file = FileNo(0);
    pool.attach(
        file,
        Path::new("loom"),
        Box::new(MemoryFile(Mutex::new(Vec::new()))),
    )
    .unwrap();
    let tree = BTree::open(std::sync::Arc::new(pool), file).unwrap();
    for key in [b"b", b"d", b"f", b"h"] {
        tree.insert(key, &[key[0]; VALUE]).unwrap();
    }
    assert_eq!(tree.height().unwrap(), 1);
    tree
}

#[test]
fn loom_two_writers_splitting_one_leaf_keep_both_entries_and_the_tree_whole() {
    loom::model(|| {
        let tree = Arc::new(tree_with_a_full_leaf());
        let other = {
            let tree = Arc::clone(&tree);
            thread::spawn(move || tree.insert(b"c", &[b'c'; VALUE]).unwrap())
        };
        tree.insert(b"g", &[b'g'; VALUE]).unwrap();
        other.join().unwrap();
        assert_eq!(tree.check().unwrap(), 6);
        assert_eq!(tree.height().unwrap(), 2);
        for key in [b"b", b"c", b"d", b"f", b"g", b"h"] {
            assert_eq!(tree.get(key).unwrap(), Some(vec![key[0]; VALUE]));
        }
    });
}

#[test]
fn loom_a_reader_beside_a_split_finds_every_entry() {
    loom::model(|| {
        let tree = Arc::new(tree_with_a_full_leaf());
        let reader = {
            let tree = Arc::clone(&tree);
            thread::spawn(move || {
                let found = tree.get(b"h").unwrap();
                let scanned = tree
                    .range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
                    .count();
                (found, scanned)
            })
        };
        tree.insert(b"a", &[b'a'; VALUE]).unwrap();
        let (found, scanned) = reader.join().unwrap();
        assert_eq!(found, Some(vec![b'h'; VALUE]));
        assert!(scanned == 4 || scanned == 5, "scanned {scanned}");
    });
}
