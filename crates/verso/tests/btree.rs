//! The disk engine's paged B+-tree (`verso::disk::BTree`) against a `BTreeMap` model, through
//! a buffer pool small enough that its pages are evicted and read back, under threads, and
//! across a power loss after a flush.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use verso::disk::{BTree, BufferPool, ReplacementPolicy, Unlogged, MAX_BTREE_ENTRY_BYTES};
use verso::fs::{FileSystem, OpenMode, SimulatedFileSystem};
use verso::Error;

const FILE: &str = "/db/index.0";

fn disk() -> Arc<SimulatedFileSystem> {
    let fs = Arc::new(SimulatedFileSystem::new(1));
    fs.create_dir_all(Path::new("/db")).unwrap();
    fs
}

fn tree_over(fs: &SimulatedFileSystem, frames: usize) -> BTree {
    let file = match fs.open(Path::new(FILE), OpenMode::ReadWrite) {
        Ok(file) => file,
        Err(_) => {
            let file = fs.open(Path::new(FILE), OpenMode::CreateNew).unwrap();
            fs.sync_dir(Path::new("/db")).unwrap();
            file
        }
    };
    let pool = Arc::new(BufferPool::new(
        frames,
        ReplacementPolicy::Clock,
        Arc::new(Unlogged),
    ));
    let file = pool.attach(Path::new(FILE), file).unwrap();
    BTree::open(pool, file).unwrap()
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn collect(range: verso::disk::btree::Range<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    range.map(Result::unwrap).collect()
}

fn bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

fn assert_ranges_match(tree: &BTree, model: &Model, low: &Bound<Vec<u8>>, high: &Bound<Vec<u8>>) {
    // BTreeMap panics on a range whose start is after its end; the tree returns nothing.
    let empty = match (low, high) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(h))
        | (Bound::Excluded(l), Bound::Included(h)) => l >= h,
        _ => false,
    };
    let expected: Vec<(Vec<u8>, Vec<u8>)> = if empty {
        Vec::new()
    } else {
        model
            .range::<Vec<u8>, _>((low.clone(), high.clone()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(collect(tree.range(bound(low), bound(high))), expected);
    let mut reversed = expected;
    reversed.reverse();
    assert_eq!(collect(tree.range_rev(bound(low), bound(high))), reversed);
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, usize),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // Short keys over a small alphabet collide often; some are long, so nodes split early.
    prop_oneof![
        4 => proptest::collection::vec(0u8..4, 1..4),
        1 => proptest::collection::vec(0u8..4, 1..300),
    ]
}

fn bound_strategy() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        Just(Bound::Unbounded),
        key().prop_map(Bound::Included),
        key().prop_map(Bound::Excluded),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (key(), 0usize..600).prop_map(|(k, n)| Op::Insert(k, n)),
        2 => key().prop_map(Op::Remove),
        1 => key().prop_map(Op::Get),
        1 => (bound_strategy(), bound_strategy()).prop_map(|(l, h)| Op::Range(l, h)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every operation answers as the model does, the tree's structure holds, and after a
    /// flush a second pool reads the same tree.
    #[test]
    fn the_tree_answers_as_a_btreemap_does(ops in proptest::collection::vec(op(), 1..400)) {
        let fs = disk();
        let tree = tree_over(&fs, 12);
        let mut model = Model::new();
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Insert(k, len) => {
                    let value = vec![n as u8; len];
                    prop_assert_eq!(tree.insert(&k, &value).unwrap(), model.insert(k, value));
                }
                Op::Remove(k) => prop_assert_eq!(tree.remove(&k).unwrap(), model.remove(&k)),
                Op::Get(k) => prop_assert_eq!(tree.get(&k).unwrap(), model.get(&k).cloned()),
                Op::Range(low, high) => assert_ranges_match(&tree, &model, &low, &high),
            }
        }
        prop_assert_eq!(tree.check().unwrap(), model.len() as u64);
        assert_ranges_match(&tree, &model, &Bound::Unbounded, &Bound::Unbounded);
        tree.pool().flush().unwrap();
        drop(tree);
        let again = tree_over(&fs, 12);
        prop_assert_eq!(again.check().unwrap(), model.len() as u64);
        assert_ranges_match(&again, &model, &Bound::Unbounded, &Bound::Unbounded);
    }
}

#[test]
fn a_flushed_tree_survives_a_power_loss_whole() {
    let fs = disk();
    let tree = tree_over(&fs, 8);
    let mut model = Model::new();
    for i in 0..3000u32 {
        let key = (i.wrapping_mul(2_654_435_761) % 10_000)
            .to_be_bytes()
            .to_vec();
        let value = vec![(i % 251) as u8; (i % 40) as usize];
        tree.insert(&key, &value).unwrap();
        model.insert(key, value);
    }
    assert!(tree.height().unwrap() >= 2);
    assert!(tree.pool().stats().evictions > 0);
    tree.pool().flush().unwrap();
    fs.crash();
    drop(tree);
    fs.restart();
    let again = tree_over(&fs, 8);
    assert_eq!(again.check().unwrap(), model.len() as u64);
    assert_ranges_match(&again, &model, &Bound::Unbounded, &Bound::Unbounded);
}

#[test]
fn many_entries_in_random_order_build_a_deep_tree_that_scans_both_ways() {
    let fs = disk();
    let tree = tree_over(&fs, 32);
    let mut model = Model::new();
    let mut x = 88_172_645_463_325_252u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Long keys (a text primary key), so internal nodes fan out less and the tree grows
        // a third level.
        let key = format!("customer:{:08}:{}", x % 1_000_000, "x".repeat(90)).into_bytes();
        let value = x.to_le_bytes().repeat((x % 4) as usize + 1);
        assert_eq!(tree.insert(&key, &value).unwrap(), model.insert(key, value));
    }
    assert!(
        tree.height().unwrap() >= 3,
        "height {}",
        tree.height().unwrap()
    );
    assert_eq!(tree.check().unwrap(), model.len() as u64);
    let low = Bound::Included(b"customer:00200000".to_vec());
    let high = Bound::Excluded(b"customer:00300000".to_vec());
    assert_ranges_match(&tree, &model, &low, &high);
    // Remove four in five: leaves empty out and stay; scans step over them.
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    for (i, key) in keys.iter().enumerate() {
        if i % 5 != 0 {
            assert_eq!(tree.remove(key).unwrap(), model.remove(key));
        }
    }
    assert_eq!(tree.check().unwrap(), model.len() as u64);
    assert_ranges_match(&tree, &model, &Bound::Unbounded, &Bound::Unbounded);
    assert_ranges_match(&tree, &model, &low, &high);
}

#[test]
fn an_entry_too_large_for_a_page_is_refused_and_changes_nothing() {
    let fs = disk();
    let tree = tree_over(&fs, 4);
    tree.insert(b"k", b"v").unwrap();
    let big = vec![1u8; MAX_BTREE_ENTRY_BYTES];
    assert!(matches!(
        tree.insert(b"k", &big),
        Err(Error::EntryTooLarge { limit, .. }) if limit == MAX_BTREE_ENTRY_BYTES
    ));
    assert_eq!(tree.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    let fits = vec![1u8; MAX_BTREE_ENTRY_BYTES - 1];
    tree.insert(b"k", &fits).unwrap();
    assert_eq!(tree.get(b"k").unwrap(), Some(fits));
}

#[test]
fn writers_and_scanners_on_threads_keep_the_tree_whole() {
    let fs = disk();
    // Each thread pins at most the height plus three pages at once.
    let tree = tree_over(&fs, 48);
    let threads = 4u32;
    let per_thread = 3000u32;
    std::thread::scope(|scope| {
        for t in 0..threads {
            let tree = tree.clone();
            scope.spawn(move || {
                for i in 0..per_thread {
                    // Interleaved key ranges, so threads split the same leaves.
                    let key = (i * threads + t).to_be_bytes();
                    assert_eq!(tree.insert(&key, &[t as u8; 24]).unwrap(), None);
                    if i % 3 == 0 {
                        assert_eq!(tree.remove(&key).unwrap(), Some(vec![t as u8; 24]));
                        tree.insert(&key, &[t as u8; 24]).unwrap();
                    }
                }
            });
        }
        let scanner = tree.clone();
        scope.spawn(move || {
            for round in 0..30 {
                // Every scan sees strictly ordered keys, each once.
                let keys: Vec<Vec<u8>> = if round % 2 == 0 {
                    scanner
                        .range(Bound::Unbounded, Bound::Unbounded)
                        .map(|e| e.unwrap().0)
                        .collect()
                } else {
                    let mut k: Vec<Vec<u8>> = scanner
                        .range_rev(Bound::Unbounded, Bound::Unbounded)
                        .map(|e| e.unwrap().0)
                        .collect();
                    k.reverse();
                    k
                };
                assert!(keys.windows(2).all(|w| w[0] < w[1]), "round {round}");
            }
        });
    });
    assert_eq!(tree.check().unwrap(), u64::from(threads * per_thread));
    for n in 0..threads * per_thread {
        assert_eq!(
            tree.get(&n.to_be_bytes()).unwrap(),
            Some(vec![(n % threads) as u8; 24])
        );
    }
    assert!(tree.pool().stats().evictions > 0);
}
