//! Helpers of the region storages' tests (`append_nvm.rs`, `delta_nvm.rs`): a table of a
//! key and a text, its writes, and the region's counters. Included by path, not through
//! `common`, so that only those tests compile it.

#![allow(dead_code)]

use verso::pmem::{PmStats, Purpose};
use verso::{ColumnType, Database, Isolation, Schema, TableId, Value};

/// A table whose rows are 8 bytes of key and a text.
pub fn table(db: &Database, name: &str) -> TableId {
    db.create_table(
        name,
        Schema::new()
            .column("id", ColumnType::U64)
            .column("text", ColumnType::Text)
            .primary_key(&["id"]),
    )
    .unwrap()
}

/// A text of `len` bytes that says `n`.
pub fn text(n: u64, len: usize) -> Value {
    let digits = n.to_string();
    Value::Text(digits.repeat(len / digits.len() + 1)[..len].to_owned())
}

pub fn insert(db: &Database, table: TableId, id: u64, len: usize) {
    let mut txn = db.begin(Isolation::Serializable);
    txn.insert(table, &[Value::U64(id), text(0, len)]).unwrap();
    txn.commit().unwrap();
}

pub fn update(db: &Database, table: TableId, id: u64, n: u64, len: usize) {
    let mut txn = db.begin(Isolation::Serializable);
    assert!(txn
        .update(table, &[Value::U64(id)], &[(1, text(n, len))])
        .unwrap());
    txn.commit().unwrap();
}

pub fn pm(db: &Database) -> PmStats {
    db.stats()
        .persistent_memory
        .expect("a region storage counts its region")
}

/// Lines persisted and bytes stored for `purpose` between two counts.
pub fn delta(after: &PmStats, before: &PmStats, purpose: Purpose) -> (u64, u64) {
    let (a, b) = (after.purpose(purpose), before.purpose(purpose));
    (
        a.lines_persisted - b.lines_persisted,
        a.logical_bytes - b.logical_bytes,
    )
}
