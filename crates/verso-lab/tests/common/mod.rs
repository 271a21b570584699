//! Helpers shared by the integration tests.

use verso::{Database, Isolation, KeyRange, TableId};

/// The rows of `table` at a fresh snapshot.
pub fn rows_in(db: &Database, table: TableId) -> verso::Result<u64> {
    let txn = db.begin(Isolation::Snapshot);
    let mut rows = 0;
    txn.scan_view(table, KeyRange::new(..), |_| {
        rows += 1;
        true
    })?;
    txn.commit()?;
    Ok(rows)
}
