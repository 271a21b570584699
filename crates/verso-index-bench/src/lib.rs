//! Measures concurrent ordered maps as candidates for Verso's primary and secondary indexes.
//!
//! See `docs/design/index-choice.md` for the results. `cargo run --release -p verso-index-bench
//! -- --full` reproduces them; without `--full` a tiny, self-verifying run finishes in under a
//! second.

pub mod bench;
pub mod keys;
pub mod maps;

use bench::{ConfigResult, RaceResult, Sizes};
use keys::{InlineKey, KeyRepr, Shape};
use maps::{CongeeArt, Fern, LockedBTree, OrderedIndex, SccTree, Skip};

/// One (map, key representation, key shape) configuration, monomorphised.
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    /// Map name for reports.
    pub map: &'static str,
    /// Map id for `--maps`.
    pub map_id: &'static str,
    /// Key representation name for reports.
    pub key: &'static str,
    /// Key representation id for `--keys-repr`.
    pub key_id: &'static str,
    /// Key shape.
    pub shape: Shape,
    /// Runs the workloads: `(shape, sizes, runs, verify)`.
    pub run: fn(Shape, &Sizes, usize, bool) -> ConfigResult,
    /// Deterministic semantic checks on `n` keys.
    pub verify: fn(Shape, u64) -> Result<(), String>,
    /// Two-thread insert-if-absent race on `n` keys.
    pub race: fn(Shape, u64) -> RaceResult,
}

fn candidate<K: KeyRepr, M: OrderedIndex<K>>(
    map_id: &'static str,
    key_id: &'static str,
    shape: Shape,
) -> Candidate {
    Candidate {
        map: M::NAME,
        map_id,
        key: K::NAME,
        key_id,
        shape,
        run: bench::run_config::<K, M>,
        verify: bench::verify::<K, M>,
        race: bench::race_check::<K, M>,
    }
}

/// Map ids accepted by `--maps`.
pub const MAP_IDS: [&str; 5] = ["scc", "ferntree", "skiplist", "btree", "congee"];
/// Key representation ids accepted by `--key-reprs`.
pub const KEY_IDS: [&str; 3] = ["u64", "inline", "vec"];

/// Every configuration, grouped by shape.
pub fn candidates() -> Vec<Candidate> {
    let mut v = Vec::new();
    for shape in Shape::ALL {
        if u64::supports(shape) {
            v.push(candidate::<u64, SccTree<u64>>("scc", "u64", shape));
            v.push(candidate::<u64, Fern<u64>>("ferntree", "u64", shape));
            v.push(candidate::<u64, Skip<u64>>("skiplist", "u64", shape));
            v.push(candidate::<u64, LockedBTree<u64>>("btree", "u64", shape));
            v.push(candidate::<u64, CongeeArt>("congee", "u64", shape));
        }
        v.push(candidate::<InlineKey, SccTree<InlineKey>>(
            "scc", "inline", shape,
        ));
        v.push(candidate::<InlineKey, Fern<InlineKey>>(
            "ferntree", "inline", shape,
        ));
        v.push(candidate::<InlineKey, Skip<InlineKey>>(
            "skiplist", "inline", shape,
        ));
        v.push(candidate::<InlineKey, LockedBTree<InlineKey>>(
            "btree", "inline", shape,
        ));
        v.push(candidate::<Vec<u8>, SccTree<Vec<u8>>>("scc", "vec", shape));
        v.push(candidate::<Vec<u8>, Fern<Vec<u8>>>(
            "ferntree", "vec", shape,
        ));
        v.push(candidate::<Vec<u8>, Skip<Vec<u8>>>(
            "skiplist", "vec", shape,
        ));
        v.push(candidate::<Vec<u8>, LockedBTree<Vec<u8>>>(
            "btree", "vec", shape,
        ));
    }
    v
}
