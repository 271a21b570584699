//! Runs the tiny mode of every candidate and checks the maps give the right answers, so the
//! benchmark cannot silently measure something broken.

use std::ops::Bound;

use verso_index_bench::bench::{Sizes, Workload};
use verso_index_bench::keys::{InlineKey, KeyBuf, KeyRepr};
use verso_index_bench::maps::{CongeeArt, Fern, LockedBTree, OrderedIndex, SccTree, Skip};
use verso_index_bench::{candidates, KEY_IDS, MAP_IDS};

#[test]
fn every_candidate_is_listed() {
    let all = candidates();
    // 5 u64 maps for 8-byte keys + 4 maps x 2 byte representations x 3 shapes.
    assert_eq!(all.len(), 5 + 4 * 2 * 3);
    for m in MAP_IDS {
        assert!(
            all.iter().any(|c| c.map_id == m),
            "no candidate for map {m}"
        );
    }
    for k in KEY_IDS {
        assert!(
            all.iter().any(|c| c.key_id == k),
            "no candidate for key {k}"
        );
    }
}

#[test]
fn tiny_mode_of_every_candidate_gives_right_answers() {
    let sizes = Sizes::tiny();
    for c in candidates() {
        let what = format!("{} / {} / {}-byte", c.map, c.key, c.shape.bytes());
        if let Err(e) = (c.verify)(c.shape, 3_000) {
            panic!("semantic check failed: {e}");
        }
        let r = (c.run)(c.shape, &sizes, 1, true);
        assert_eq!(r.errors, 0, "{what}: wrong answers in the tiny run");
        for w in Workload::ALL {
            for cpu in [false, true] {
                let (med, _, _) = r
                    .summary(w, cpu)
                    .unwrap_or_else(|| panic!("{what}: no {w:?}"));
                assert!(med.is_finite() && med > 0.0, "{what}: {w:?} rate {med}");
            }
        }
        // Scans start at existing keys spread over the key space: nearly all return 100.
        assert!(
            r.mean_scan_len > 95.0 && r.mean_scan_len <= 100.0,
            "{what}: mean scan length {}",
            r.mean_scan_len
        );
    }
}

#[test]
fn race_check_is_clean_for_maps_with_atomic_insert_if_absent() {
    for c in candidates() {
        // ferntree 0.7's get_or_insert_with is not atomic when an insert has to split a leaf;
        // the benchmark reports it, and this test only pins the maps we may depend on.
        if c.map_id == "ferntree" {
            continue;
        }
        let r = (c.race)(c.shape, 5_000);
        assert!(
            r.is_clean(),
            "{} / {} / {}: {r:?}",
            c.map,
            c.key,
            c.shape.bytes()
        );
    }
}

/// The exact calls the engine will use, on a hand-made two-column key.
fn api_smoke<K: KeyRepr<Q = [u8], Buf = KeyBuf>, M: OrderedIndex<K>>() {
    let m = M::new();
    let key = |a: u64, b: u64| KeyBuf::from_columns(&[a, b]);
    for a in 0..10u64 {
        for b in (0..10u64).rev() {
            assert!(m.insert_if_absent(K::owned(&key(a, b)), (a * 10 + b) as usize));
        }
    }
    assert!(
        !m.insert_if_absent(K::owned(&key(3, 3)), 999),
        "duplicate must fail"
    );
    assert_eq!(
        m.get(key(3, 3).as_slice()),
        Some(33),
        "failed insert must not overwrite"
    );
    assert_eq!(m.get(key(3, 10).as_slice()), None);

    // All (3, *) entries: [key(3,0), key(4,0)).
    let (lo, hi) = (key(3, 0), key(4, 0));
    let (lo, hi) = (lo.as_slice(), hi.as_slice());
    let mut got = Vec::new();
    let n = m.scan(Bound::Included(lo), Bound::Excluded(hi), 100, |_, v| {
        got.push(v)
    });
    assert_eq!(n, 10);
    assert_eq!(got, (30..40).collect::<Vec<_>>());

    // Excluded lower bound and a limit.
    let mut got = Vec::new();
    m.scan(Bound::Excluded(lo), Bound::Unbounded, 5, |_, v| got.push(v));
    assert_eq!(got, vec![31, 32, 33, 34, 35]);

    assert!(m.remove(key(3, 5).as_slice()));
    assert!(!m.remove(key(3, 5).as_slice()));
    let mut got = Vec::new();
    m.scan(Bound::Included(lo), Bound::Excluded(hi), 100, |_, v| {
        got.push(v)
    });
    assert_eq!(got, vec![30, 31, 32, 33, 34, 36, 37, 38, 39]);
}

#[test]
fn composite_key_api_smoke() {
    api_smoke::<Vec<u8>, SccTree<Vec<u8>>>();
    api_smoke::<InlineKey, SccTree<InlineKey>>();
    api_smoke::<Vec<u8>, Skip<Vec<u8>>>();
    api_smoke::<InlineKey, Skip<InlineKey>>();
    api_smoke::<Vec<u8>, Fern<Vec<u8>>>();
    api_smoke::<InlineKey, Fern<InlineKey>>();
    api_smoke::<Vec<u8>, LockedBTree<Vec<u8>>>();
    api_smoke::<InlineKey, LockedBTree<InlineKey>>();
}

#[test]
fn congee_u64_api_smoke() {
    let m = CongeeArt::new();
    for k in [5u64, 1, 9, 3, 7] {
        assert!(m.insert_if_absent(k, k as usize * 10));
    }
    assert!(!m.insert_if_absent(5, 0));
    assert_eq!(m.get(&5), Some(50));
    let mut got = Vec::new();
    m.scan(Bound::Excluded(&1), Bound::Included(&7), 100, |k, _| {
        got.push(*k)
    });
    assert_eq!(got, vec![3, 5, 7]);
    assert!(m.remove(&5));
    assert_eq!(m.get(&5), None);
}
