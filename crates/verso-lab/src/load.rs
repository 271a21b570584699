//! Bulk loading shared by the workloads: rows in batches of committed transactions, with
//! progress.

use verso::{Database, Isolation, TableId, Value};

use crate::workload::{LabError, LoadProgress};

/// Rows inserted per loading transaction: large enough that commits cost nothing, small
/// enough that the progress bar moves.
pub const LOAD_BATCH: u64 = 10_000;

/// Inserts one row per number in `keys` (built by `row` into a reused buffer), in
/// transactions of [`LOAD_BATCH`] rows, advancing `progress` per batch.
pub fn insert_rows(
    db: &Database,
    table: TableId,
    keys: std::ops::Range<u64>,
    progress: &dyn LoadProgress,
    mut row: impl FnMut(u64, &mut Vec<Value>),
) -> Result<(), LabError> {
    let mut buffer = Vec::new();
    let mut next = keys.start;
    while next < keys.end {
        let end = next.saturating_add(LOAD_BATCH).min(keys.end);
        let mut txn = db.begin(Isolation::Snapshot);
        for key in next..end {
            buffer.clear();
            row(key, &mut buffer);
            txn.insert(table, &buffer)?;
        }
        txn.commit()?;
        progress.advance(end - next);
        next = end;
    }
    Ok(())
}
