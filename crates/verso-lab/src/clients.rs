//! Logical clients over a worker thread, and the commit latency they see (`--clients`).
//!
//! A server with N connections has N transactions in flight whose answers wait for
//! durability; on a few cores it runs them on a few threads. The lab's `--clients N` does
//! the same: each OLTP worker thread serves its share of the N clients. A client's
//! transaction commits with [`verso::Transaction::commit_deferred`] (visible at once, a
//! ticket to wait on for durability), and the client starts its next transaction only once
//! that ticket is durable: the worker runs other clients' transactions meanwhile, and waits
//! only when all of its clients are waiting for their acknowledgements.
//!
//! Workloads commit through [`commit`] instead of `Transaction::commit`. The runner
//! installs a [`Pipeline`] on each OLTP worker thread for the run ([`install`], then
//! [`finish`]); anywhere else (loading, consistency checks, tests) [`commit`] is plain
//! `Transaction::commit`.
//!
//! Commit latency is what a client waits from asking to commit until its commit is
//! acknowledged (durable as the database's durability level promises): with one client
//! per worker, the time `commit()` takes; with more, from `commit_deferred` until the
//! worker sees the ticket durable. Recorded in microseconds in an HDR histogram.
//!
//! Invariants: a pipeline holds at most `clients` unacknowledged commits; every commit it
//! counted is acknowledged (waited for) before [`finish`] returns, or the run fails.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::Instant;

use hdrhistogram::Histogram;
use verso::{CommitTicket, Transaction};

/// The longest latency the histogram holds exactly (larger ones are clamped): one minute.
const MAX_LATENCY_MICROS: u64 = 60_000_000;

/// A commit latency histogram in microseconds, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_MICROS, 3).expect("valid histogram bounds")
}

/// One worker thread's clients: their commits not yet acknowledged, oldest first, and the
/// latencies of those that were.
pub struct Pipeline {
    clients: usize,
    in_flight: VecDeque<(Instant, CommitTicket)>,
    latency: Histogram<u64>,
}

impl Pipeline {
    fn new(clients: usize) -> Self {
        debug_assert!(clients >= 1);
        Pipeline {
            clients,
            in_flight: VecDeque::with_capacity(clients),
            latency: latency_histogram(),
        }
    }

    fn record(&mut self, asked: Instant) {
        let micros = asked.elapsed().as_micros().max(1);
        let micros = u64::try_from(micros).unwrap_or(u64::MAX);
        self.latency
            .saturating_record(micros.min(MAX_LATENCY_MICROS));
    }

    fn commit(&mut self, txn: Transaction<'_>) -> verso::Result<()> {
        let asked = Instant::now();
        if self.clients == 1 {
            txn.commit()?;
            self.record(asked);
            return Ok(());
        }
        let ticket = txn.commit_deferred()?;
        self.in_flight.push_back((asked, ticket));
        self.settle()
    }

    /// Acknowledges the commits that are durable, in order; while every client still
    /// waits for one, waits for the oldest.
    fn settle(&mut self) -> verso::Result<()> {
        loop {
            let Some((asked, ticket)) = self.in_flight.front() else {
                return Ok(());
            };
            let full = self.in_flight.len() >= self.clients;
            if !full && !ticket.is_durable() {
                return Ok(());
            }
            let asked = *asked;
            let (_, ticket) = self.in_flight.pop_front().expect("a front");
            ticket.wait()?;
            self.record(asked);
        }
    }

    /// Waits for every commit still in flight.
    fn drain(&mut self) -> verso::Result<()> {
        while let Some((asked, ticket)) = self.in_flight.pop_front() {
            ticket.wait()?;
            self.record(asked);
        }
        Ok(())
    }
}

thread_local! {
    static PIPELINE: RefCell<Option<Pipeline>> = const { RefCell::new(None) };
}

/// Serves `clients` (at least 1) clients on this thread until [`finish`].
pub fn install(clients: usize) {
    PIPELINE.with(|p| *p.borrow_mut() = Some(Pipeline::new(clients.max(1))));
}

/// Acknowledges every commit in flight on this thread and returns the latencies
/// recorded since [`install`] (`None` if no pipeline was installed).
pub fn finish() -> verso::Result<Option<Histogram<u64>>> {
    let Some(mut pipeline) = PIPELINE.with(|p| p.borrow_mut().take()) else {
        return Ok(None);
    };
    pipeline.drain()?;
    Ok(Some(pipeline.latency))
}

/// Commits `txn` as this thread's clients do: through the installed pipeline, or plainly
/// (`Transaction::commit`) when none is. With several clients an `Ok` means the commit
/// is visible and will be acknowledged before the client's next transaction (or
/// [`finish`]); an error of a durability wait reaches whichever commit waited.
pub fn commit(txn: Transaction<'_>) -> verso::Result<()> {
    let mut txn = Some(txn);
    let served = PIPELINE.with(|p| {
        p.borrow_mut()
            .as_mut()
            .map(|pipeline| pipeline.commit(txn.take().expect("not taken yet")))
    });
    match served {
        Some(result) => result,
        None => txn.take().expect("not taken").commit(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verso::{ColumnType, Database, Isolation, Options, Schema, Value};

    fn database(dir: &std::path::Path) -> (Database, verso::TableId) {
        let db = Database::open(Options::default().path(dir)).unwrap();
        let table = db
            .create_table(
                "t",
                Schema::new()
                    .column("k", ColumnType::U64)
                    .column("v", ColumnType::U64)
                    .primary_key(&["k"]),
            )
            .unwrap();
        (db, table)
    }

    fn insert(db: &Database, table: verso::TableId, key: u64) -> verso::Result<()> {
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &[Value::U64(key), Value::U64(key)])?;
        commit(txn)
    }

    #[test]
    fn without_a_pipeline_commit_is_plain() {
        let dir = tempfile::tempdir().unwrap();
        let (db, table) = database(dir.path());
        insert(&db, table, 1).unwrap();
        assert!(finish().unwrap().is_none());
        let durable = db.stats().durability.unwrap();
        assert_eq!(durable.log_durable, durable.log_tail, "commit() waited");
    }

    #[test]
    fn a_pipeline_keeps_at_most_its_clients_in_flight_and_acknowledges_all_at_finish() {
        let dir = tempfile::tempdir().unwrap();
        let (db, table) = database(dir.path());
        install(4);
        for key in 0..100 {
            insert(&db, table, key).unwrap();
            let in_flight = PIPELINE.with(|p| p.borrow().as_ref().unwrap().in_flight.len());
            assert!(in_flight < 4, "a full pipeline waits for its oldest");
        }
        let latency = finish().unwrap().expect("installed");
        assert_eq!(latency.len(), 100, "every commit acknowledged once");
        let durable = db.stats().durability.unwrap();
        assert!(
            durable.log_durable >= durable.log_tail,
            "all durable at finish"
        );
        // Every commit is there after a reopen.
        drop(db);
        let db = Database::open(Options::default().path(dir.path())).unwrap();
        let table = db.table("t").unwrap();
        let txn = db.begin(Isolation::Snapshot);
        assert_eq!(txn.scan(table, ..).unwrap().count(), 100);
    }

    #[test]
    fn one_client_records_each_commit_as_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let (db, table) = database(dir.path());
        install(1);
        insert(&db, table, 7).unwrap();
        let durable = db.stats().durability.unwrap();
        assert_eq!(durable.log_durable, durable.log_tail);
        assert_eq!(finish().unwrap().unwrap().len(), 1);
    }
}
