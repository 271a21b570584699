//! The query operators CH-benCHmark's plans are written with: scan at a snapshot (with the
//! filter and projection pushed into it), filter, hash join, aggregate, sort, limit.
//!
//! Rows between operators are *typed tuples* chosen by each plan (`(i64, f64)`, a small
//! struct...), not vectors of a dynamic value type: a scan reads only the columns a plan
//! needs straight out of the engine's borrowed [`RowView`] into plain integers and floats,
//! text is copied only for rows that survive the filters, and the compiler checks every
//! plan's column types. The operators stay generic over the tuple type, so each is a few
//! lines over a `Vec` or a hash map. See `docs/design/ch.md` for the trade-off.
//!
//! Results leave a plan as a [`QueryResult`] of [`Cell`]s, the one shape the naive
//! evaluator (`naive.rs`) produces too, so the two can be compared.

use std::cell::Cell as CountCell;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use verso::{KeyRange, RowView, TableId, Transaction, ValueRef};

use crate::workload::LabError;

/// A fast, non-cryptographic hasher for the small integer keys of join and group tables
/// (the multiply-rotate of rustc's FxHash). The data are ours, so hash flooding is no
/// concern, and SipHash would cost more than the probe itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct FastHasher {
    hash: u64,
}

const FAST_HASH_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(FAST_HASH_SEED);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.hash
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, value: u8) {
        self.add(u64::from(value));
    }

    fn write_u32(&mut self, value: u32) {
        self.add(u64::from(value));
    }

    fn write_u64(&mut self, value: u64) {
        self.add(value);
    }

    fn write_i64(&mut self, value: i64) {
        self.add(value as u64);
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }
}

/// A hash map with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// A hash set with [`FastHasher`].
pub type FastSet<K> = std::collections::HashSet<K, BuildHasherDefault<FastHasher>>;

// ---------------------------------------------------------------------------------------
// Reading columns out of a borrowed row.
// ---------------------------------------------------------------------------------------

/// An integer column (`I64` or `U64`); `None` for NULL. TPC-C's loader chooses the integer
/// types, so both are accepted; a value of another type is a schema bug.
pub fn int(value: ValueRef<'_>) -> Option<i64> {
    match value {
        ValueRef::I64(v) => Some(v),
        ValueRef::U64(v) => i64::try_from(v).ok(),
        ValueRef::Null => None,
        other => {
            debug_assert!(false, "expected an integer column, found {other}");
            None
        }
    }
}

/// A numeric column as `f64` (`F64`, or an integer one); `None` for NULL.
pub fn num(value: ValueRef<'_>) -> Option<f64> {
    match value {
        ValueRef::F64(v) => Some(v),
        ValueRef::I64(v) => Some(v as f64),
        ValueRef::U64(v) => Some(v as f64),
        ValueRef::Null => None,
        other => {
            debug_assert!(false, "expected a numeric column, found {other}");
            None
        }
    }
}

/// A text column; `None` for NULL.
pub fn text(value: ValueRef<'_>) -> Option<&str> {
    match value {
        ValueRef::Text(v) => Some(v),
        ValueRef::Null => None,
        other => {
            debug_assert!(false, "expected a text column, found {other}");
            None
        }
    }
}

// ---------------------------------------------------------------------------------------
// Scan.
// ---------------------------------------------------------------------------------------

/// One query's access to the database: a read-only snapshot and the count of base-table
/// tuples its scans visited (Funke et al.'s normalization of OLAP throughput).
pub struct QueryScope<'txn, 'db> {
    txn: &'txn Transaction<'db>,
    scanned_tuples: CountCell<u64>,
}

impl<'txn, 'db> QueryScope<'txn, 'db> {
    /// A scope reading at `txn`'s snapshot. The transaction should be read-only.
    pub fn new(txn: &'txn Transaction<'db>) -> Self {
        QueryScope {
            txn,
            scanned_tuples: CountCell::new(0),
        }
    }

    /// Base-table tuples visited so far.
    pub fn scanned_tuples(&self) -> u64 {
        self.scanned_tuples.get()
    }

    /// Scans a whole table at the snapshot (the engine's zero-copy `scan_view`), handing
    /// each visible row to `visit`. Every visited row counts as scanned.
    ///
    /// `visit` returns an `Option` only so that it can skip the rest of a row with `?` (a
    /// NULL where the plan needs a value, a failed filter); the value is ignored. It runs
    /// under the row's read latch: it may read hash tables and push into vectors, but must
    /// not touch the database.
    pub fn scan_each(
        &self,
        table: TableId,
        mut visit: impl FnMut(RowView<'_>) -> Option<()>,
    ) -> Result<(), LabError> {
        let mut visited = 0u64;
        self.txn.scan_view(table, KeyRange::new(..), |row| {
            visited += 1;
            let _ = visit(row);
            true
        })?;
        self.scanned_tuples.set(self.scanned_tuples.get() + visited);
        Ok(())
    }

    /// Scan with the filter and projection pushed down: `project` returns `Some(tuple)` for
    /// rows that pass, `None` for rows that do not. The surviving tuples, in key order.
    pub fn scan<T>(
        &self,
        table: TableId,
        mut project: impl FnMut(RowView<'_>) -> Option<T>,
    ) -> Result<Vec<T>, LabError> {
        let mut rows = Vec::new();
        self.scan_each(table, |row| {
            rows.push(project(row)?);
            Some(())
        })?;
        Ok(rows)
    }
}

// ---------------------------------------------------------------------------------------
// Filter.
// ---------------------------------------------------------------------------------------

/// Keeps the rows that satisfy `predicate` (for predicates that need more than one input,
/// such as a comparison with a subquery's result, so cannot be pushed into the scan).
pub fn filter<T>(mut rows: Vec<T>, mut predicate: impl FnMut(&T) -> bool) -> Vec<T> {
    rows.retain(|row| predicate(row));
    rows
}

// ---------------------------------------------------------------------------------------
// Hash join.
// ---------------------------------------------------------------------------------------

/// The build side of a hash join: every build row under its join key. Probing returns all
/// rows with an equal key, so it serves inner joins (iterate the matches), semi joins
/// ([`HashJoin::contains`]) and anti joins (`!contains`).
pub struct HashJoin<K, V> {
    table: FastMap<K, Vec<V>>,
}

impl<K: Hash + Eq, V> HashJoin<K, V> {
    /// Builds the table from `rows`, keyed by `key`.
    pub fn build(rows: impl IntoIterator<Item = V>, key: impl Fn(&V) -> K) -> Self {
        let mut table: FastMap<K, Vec<V>> = FastMap::default();
        for row in rows {
            table.entry(key(&row)).or_default().push(row);
        }
        HashJoin { table }
    }

    /// The build rows whose key equals `key` (empty if none).
    pub fn probe(&self, key: &K) -> &[V] {
        self.table.get(key).map_or(&[], Vec::as_slice)
    }

    /// Whether any build row has this key (semi join; its negation is the anti join).
    pub fn contains(&self, key: &K) -> bool {
        self.table.contains_key(key)
    }

    /// Number of distinct keys.
    pub fn key_count(&self) -> usize {
        self.table.len()
    }
}

/// The build side of a join on a key the build side holds at most once (a primary key):
/// one row per key, so a probe is a single lookup without a vector.
pub struct UniqueHashJoin<K, V> {
    table: FastMap<K, V>,
}

impl<K: Hash + Eq, V> UniqueHashJoin<K, V> {
    /// Builds the table from `rows` keyed by `key`. A duplicate key keeps the first row (in
    /// debug builds it is an assertion failure: the caller promised uniqueness).
    pub fn build(rows: impl IntoIterator<Item = (K, V)>) -> Self {
        let mut table: FastMap<K, V> = FastMap::default();
        for (key, row) in rows {
            let fresh = !table.contains_key(&key);
            debug_assert!(fresh, "unique join build side has a duplicate key");
            table.entry(key).or_insert(row);
        }
        UniqueHashJoin { table }
    }

    /// The build row with this key, if any.
    pub fn probe(&self, key: &K) -> Option<&V> {
        self.table.get(key)
    }

    /// Whether a build row has this key.
    pub fn contains(&self, key: &K) -> bool {
        self.table.contains_key(key)
    }

    /// Number of build rows.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether the build side is empty.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

// ---------------------------------------------------------------------------------------
// Aggregate.
// ---------------------------------------------------------------------------------------

/// A running aggregate: SQL's `sum`, `count`, `avg`, `min`, `max` and tuples of them.
pub trait Accumulator: Default {
    /// The input one row contributes.
    type Input;
    /// Adds one row.
    fn add(&mut self, input: Self::Input);
}

/// `sum(x)` over floats; `None` (SQL NULL) until a non-NULL value arrives.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sum(pub Option<f64>);

impl Accumulator for Sum {
    type Input = Option<f64>;
    fn add(&mut self, input: Option<f64>) {
        if let Some(value) = input {
            self.0 = Some(self.0.unwrap_or(0.0) + value);
        }
    }
}

/// `sum(x)` over integers; `None` (SQL NULL) until a non-NULL value arrives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntSum(pub Option<i64>);

impl Accumulator for IntSum {
    type Input = Option<i64>;
    fn add(&mut self, input: Option<i64>) {
        if let Some(value) = input {
            self.0 = Some(self.0.unwrap_or(0).saturating_add(value));
        }
    }
}

/// `count(x)`: counts the non-NULL inputs (`count(*)` passes `true` for every row).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count(pub i64);

impl Accumulator for Count {
    type Input = bool;
    fn add(&mut self, counted: bool) {
        self.0 += i64::from(counted);
    }
}

/// `avg(x)` over the non-NULL inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Avg {
    sum: f64,
    count: u64,
}

impl Avg {
    /// The average, `None` (SQL NULL) over no input.
    pub fn value(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

impl Accumulator for Avg {
    type Input = Option<f64>;
    fn add(&mut self, input: Option<f64>) {
        if let Some(value) = input {
            self.sum += value;
            self.count += 1;
        }
    }
}

/// `min(x)` over the non-NULL inputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Min<T>(pub Option<T>);

impl<T> Default for Min<T> {
    fn default() -> Self {
        Min(None)
    }
}

impl<T: PartialOrd> Accumulator for Min<T> {
    type Input = Option<T>;
    fn add(&mut self, input: Option<T>) {
        if let Some(value) = input {
            if self.0.as_ref().is_none_or(|current| value < *current) {
                self.0 = Some(value);
            }
        }
    }
}

/// `max(x)` over the non-NULL inputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Max<T>(pub Option<T>);

impl<T> Default for Max<T> {
    fn default() -> Self {
        Max(None)
    }
}

impl<T: PartialOrd> Accumulator for Max<T> {
    type Input = Option<T>;
    fn add(&mut self, input: Option<T>) {
        if let Some(value) = input {
            if self.0.as_ref().is_none_or(|current| value > *current) {
                self.0 = Some(value);
            }
        }
    }
}

macro_rules! tuple_accumulator {
    ($($name:ident $input:ident $index:tt),+) => {
        impl<$($name: Accumulator),+> Accumulator for ($($name,)+) {
            type Input = ($($name::Input,)+);
            fn add(&mut self, input: Self::Input) {
                $(self.$index.add(input.$index);)+
            }
        }
    };
}

tuple_accumulator!(A a 0);
tuple_accumulator!(A a 0, B b 1);
tuple_accumulator!(A a 0, B b 1, C c 2);
tuple_accumulator!(A a 0, B b 1, C c 2, D d 3);
tuple_accumulator!(A a 0, B b 1, C c 2, D d 3, E e 4);

/// Hash aggregation: `GROUP BY key` with the accumulator `A` per group.
pub struct GroupBy<K, A> {
    groups: FastMap<K, A>,
}

impl<K: Hash + Eq, A: Accumulator> Default for GroupBy<K, A> {
    fn default() -> Self {
        GroupBy {
            groups: FastMap::default(),
        }
    }
}

impl<K: Hash + Eq, A: Accumulator> GroupBy<K, A> {
    /// An empty aggregation.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one row to its group.
    pub fn add(&mut self, key: K, input: A::Input) {
        self.groups.entry(key).or_default().add(input);
    }

    /// Adds one row whose key is costly to build (text) only when its group is new.
    pub fn add_with<Q>(&mut self, key: &Q, make_key: impl FnOnce(&Q) -> K, input: A::Input)
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(accumulator) = self.groups.get_mut(key) {
            accumulator.add(input);
        } else {
            let mut accumulator = A::default();
            accumulator.add(input);
            self.groups.insert(make_key(key), accumulator);
        }
    }

    /// The accumulator of one group, if it has rows.
    pub fn get(&self, key: &K) -> Option<&A> {
        self.groups.get(key)
    }

    /// Every group with its accumulator, in no particular order.
    pub fn finish(self) -> Vec<(K, A)> {
        self.groups.into_iter().collect()
    }
}

/// Aggregation without `GROUP BY`: one accumulator over every row (SQL returns one row even
/// over no input).
pub fn aggregate<A: Accumulator>(inputs: impl IntoIterator<Item = A::Input>) -> A {
    let mut accumulator = A::default();
    for input in inputs {
        accumulator.add(input);
    }
    accumulator
}

// ---------------------------------------------------------------------------------------
// Sort and limit.
// ---------------------------------------------------------------------------------------

/// Sorts by `compare` (stable).
pub fn sort_by<T>(mut rows: Vec<T>, compare: impl FnMut(&T, &T) -> Ordering) -> Vec<T> {
    rows.sort_by(compare);
    rows
}

/// The direction of one ORDER BY key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Smallest first.
    Ascending,
    /// Largest first.
    Descending,
}

/// ORDER BY over result rows: by the given columns, each ascending or descending, ties
/// broken by the whole row ([`compare_rows`]) so the order is total.
pub fn order_by(rows: Vec<Vec<Cell>>, keys: &[(usize, Direction)]) -> QueryResult {
    let rows = sort_by(rows, |a, b| {
        keys.iter()
            .map(|&(column, direction)| {
                let ordering = a[column].total_cmp(&b[column]);
                match direction {
                    Direction::Ascending => ordering,
                    Direction::Descending => ordering.reverse(),
                }
            })
            .find(|ordering| ordering.is_ne())
            .unwrap_or_else(|| compare_rows(a, b))
    });
    QueryResult::ordered(rows)
}

/// The first `count` rows.
pub fn limit<T>(mut rows: Vec<T>, count: usize) -> Vec<T> {
    rows.truncate(count);
    rows
}

// ---------------------------------------------------------------------------------------
// Results.
// ---------------------------------------------------------------------------------------

/// One value of a query result.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// SQL NULL (an aggregate over no rows).
    Null,
    /// An integer.
    Int(i64),
    /// A float (sums, averages, amounts).
    Float(f64),
    /// Text.
    Text(String),
}

impl Cell {
    /// A float or NULL.
    pub fn float(value: Option<f64>) -> Cell {
        value.map_or(Cell::Null, Cell::Float)
    }

    /// An integer or NULL.
    pub fn int(value: Option<i64>) -> Cell {
        value.map_or(Cell::Null, Cell::Int)
    }

    /// A total order over cells for tie-breaking and order-insensitive comparison: NULL
    /// first, then numbers (integers and floats compared as numbers), then text.
    pub fn total_cmp(&self, other: &Cell) -> Ordering {
        fn rank(cell: &Cell) -> u8 {
            match cell {
                Cell::Null => 0,
                Cell::Int(_) | Cell::Float(_) => 1,
                Cell::Text(_) => 2,
            }
        }
        match (self, other) {
            (Cell::Int(a), Cell::Int(b)) => a.cmp(b),
            (Cell::Int(_) | Cell::Float(_), Cell::Int(_) | Cell::Float(_)) => {
                let (a, b) = (self.as_f64().unwrap_or(0.0), other.as_f64().unwrap_or(0.0));
                a.total_cmp(&b)
            }
            (Cell::Text(a), Cell::Text(b)) => a.cmp(b),
            _ => rank(self).cmp(&rank(other)),
        }
    }

    /// The cell as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Int(v) => Some(*v as f64),
            Cell::Float(v) => Some(*v),
            Cell::Null | Cell::Text(_) => None,
        }
    }

    /// Whether two cells are equal, floats within a relative `tolerance` (sums taken in a
    /// different order differ in the last bits).
    pub fn approx_eq(&self, other: &Cell, tolerance: f64) -> bool {
        match (self, other) {
            (Cell::Float(_), Cell::Float(_) | Cell::Int(_)) | (Cell::Int(_), Cell::Float(_)) => {
                let (a, b) = (self.as_f64().unwrap_or(0.0), other.as_f64().unwrap_or(0.0));
                (a - b).abs() <= tolerance * a.abs().max(b.abs()).max(1.0)
            }
            _ => self == other,
        }
    }
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Null => f.write_str("NULL"),
            Cell::Int(v) => write!(f, "{v}"),
            Cell::Float(v) => write!(f, "{v:.4}"),
            Cell::Text(v) => write!(f, "{v:?}"),
        }
    }
}

/// Compares rows cell by cell with [`Cell::total_cmp`] (the tie-breaker that makes every
/// ORDER BY a total order, so two evaluators agree on the order of equal keys).
pub fn compare_rows(a: &[Cell], b: &[Cell]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.total_cmp(y))
        .find(|ordering| ordering.is_ne())
        .unwrap_or_else(|| a.len().cmp(&b.len()))
}

/// What a query returned.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryResult {
    /// The rows. For a query with ORDER BY, in that order, ties broken by the whole row
    /// ([`compare_rows`]); otherwise in no particular order.
    pub rows: Vec<Vec<Cell>>,
    /// Whether the order of `rows` is part of the result (the query has ORDER BY).
    pub ordered: bool,
}

impl QueryResult {
    /// A result whose row order is the query's ORDER BY.
    pub fn ordered(rows: Vec<Vec<Cell>>) -> Self {
        QueryResult {
            rows,
            ordered: true,
        }
    }

    /// A result with no defined row order.
    pub fn unordered(rows: Vec<Vec<Cell>>) -> Self {
        QueryResult {
            rows,
            ordered: false,
        }
    }

    /// Whether the result says something: at least one row with a non-NULL cell (an
    /// aggregate over no rows returns one all-NULL row, which proves nothing).
    pub fn has_data(&self) -> bool {
        self.rows
            .iter()
            .any(|row| row.iter().any(|cell| *cell != Cell::Null))
    }

    /// Checks that `other` has the same rows, in the same order if this result is
    /// ordered, floats within a relative `tolerance`. The error names the first difference.
    pub fn check_matches(&self, other: &QueryResult, tolerance: f64) -> Result<(), String> {
        if self.rows.len() != other.rows.len() {
            return Err(format!(
                "{} rows against {} rows",
                self.rows.len(),
                other.rows.len()
            ));
        }
        fn in_order(result: &QueryResult, sort: bool) -> Vec<&Vec<Cell>> {
            let mut rows: Vec<&Vec<Cell>> = result.rows.iter().collect();
            if sort {
                rows.sort_by(|a, b| compare_rows(a, b));
            }
            rows
        }
        let (ours, theirs) = (
            in_order(self, !self.ordered),
            in_order(other, !self.ordered),
        );
        for (position, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            let equal = a.len() == b.len()
                && a.iter()
                    .zip(b.iter())
                    .all(|(x, y)| x.approx_eq(y, tolerance));
            if !equal {
                let show = |row: &[Cell]| {
                    row.iter()
                        .map(Cell::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(format!(
                    "row {position} differs: [{}] against [{}]",
                    show(a),
                    show(b)
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_join_returns_every_match_and_nothing_else() {
        let build = HashJoin::build(vec![(1, "a"), (2, "b"), (1, "c")], |row| row.0);
        let matches: Vec<&str> = build.probe(&1).iter().map(|row| row.1).collect();
        assert_eq!(matches, ["a", "c"]);
        assert!(build.probe(&3).is_empty());
        assert!(build.contains(&2) && !build.contains(&3));
        assert_eq!(build.key_count(), 2);
    }

    #[test]
    fn aggregates_follow_sql_null_rules() {
        let sums: (Sum, Count, Avg, Min<i64>, Max<i64>) = aggregate([
            (Some(1.0), true, Some(1.0), Some(5), Some(5)),
            (None, true, None, None, None),
            (Some(3.0), true, Some(3.0), Some(2), Some(2)),
        ]);
        assert_eq!(sums.0, Sum(Some(4.0)));
        assert_eq!(sums.1, Count(3));
        assert_eq!(sums.2.value(), Some(2.0));
        assert_eq!(sums.3, Min(Some(2)));
        assert_eq!(sums.4, Max(Some(5)));
        let empty: (Sum, Avg) = aggregate([]);
        assert_eq!(empty.0, Sum(None));
        assert_eq!(empty.1.value(), None);
    }

    #[test]
    fn group_by_sorts_and_limits() {
        let mut groups: GroupBy<&str, Count> = GroupBy::new();
        for key in ["x", "y", "x", "z", "x", "y"] {
            groups.add(key, true);
        }
        let rows = sort_by(groups.finish(), |a, b| b.1 .0.cmp(&a.1 .0));
        let top = limit(rows, 2);
        assert_eq!(top, vec![("x", Count(3)), ("y", Count(2))]);
        let filtered = filter(vec![1, 2, 3, 4], |v| v % 2 == 0);
        assert_eq!(filtered, [2, 4]);
    }

    #[test]
    fn results_compare_with_tolerance_and_order() {
        let a = QueryResult::unordered(vec![
            vec![Cell::Int(1), Cell::Float(1.0)],
            vec![Cell::Int(2), Cell::Float(2.0)],
        ]);
        let b = QueryResult::unordered(vec![
            vec![Cell::Int(2), Cell::Float(2.0 + 1e-12)],
            vec![Cell::Int(1), Cell::Float(1.0)],
        ]);
        assert_eq!(a.check_matches(&b, 1e-9), Ok(()));
        let ordered = QueryResult::ordered(a.rows.clone());
        assert!(ordered.check_matches(&b, 1e-9).is_err());
        assert!(a.has_data());
        assert!(!QueryResult::unordered(vec![vec![Cell::Null]]).has_data());
    }
}
