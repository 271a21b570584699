//! Helpers shared by the integration tests.

// Each test binary uses some of them.
#![allow(dead_code)]

pub mod reproduce;

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

/// Runs `run` on its own thread and returns what it returns, or fails the test if it has
/// not returned within `deadline` (the thread is then left behind, hung): a regression
/// that hangs fails its test instead of the whole suite.
pub fn within<T: Send + 'static>(
    deadline: std::time::Duration,
    run: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(run());
    });
    receiver
        .recv_timeout(deadline)
        .unwrap_or_else(|_| panic!("still running after {deadline:?}: it hangs"))
}
