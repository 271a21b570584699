//! The lab's workloads in SQL, for the peers.
//!
//! Each workload's SQL side is an [`SqlWorkload`], implemented by the workload's own type
//! (so it has the same configuration), next to which the Verso side lives in
//! `crate::workloads`. A peer's worker draws its transaction's inputs with the same
//! functions, in the same order, from the same seed as Verso's worker does, so the mix and
//! the keys are the same; only the way the transaction reaches the data differs.

pub mod ch;
pub mod tpcb;
pub mod tpcc;
pub mod tpcc_consistency;
pub mod ycsb;

use super::sql::{Session, SqlError, SqlRow, SqlValue, TableDef, TxnMode};
use super::PeerKind;
use crate::workload::{AbortReason, LabError, OlapWorker, OltpWorker, TxnOutcome, Work};

/// A workload as the peers run it.
pub trait SqlWorkload: Sync {
    /// Its tables, as Verso's: the same columns in the same order, keys and indexes.
    fn tables(&self) -> Vec<TableDef>;

    /// Whether it runs on `peer`; `Err` says why not.
    fn supports(&self, _peer: PeerKind) -> Result<(), String> {
        Ok(())
    }

    /// A query the held snapshot runs so that its snapshot is taken (PostgreSQL and SQLite
    /// take it at the first read); its result is ignored.
    fn snapshot_read(&self) -> &'static str;

    /// A worker for OLTP thread `worker` of `workers` on `session`.
    fn oltp_worker<'a>(
        &'a self,
        session: Box<dyn Session>,
        peer: PeerKind,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'a>, LabError>;

    /// A worker for OLAP thread `worker`, or `None` if the workload has no queries.
    fn olap_worker<'a>(
        &'a self,
        _session: Box<dyn Session>,
        _peer: PeerKind,
        _worker: usize,
        _seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'a>>, LabError> {
        Ok(None)
    }

    /// Checks the workload's consistency conditions on the peer, at one snapshot.
    fn check_consistency(&self, session: &mut dyn Session, peer: PeerKind) -> Result<(), LabError>;
}

/// How a transaction's body ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Commit it.
    Commit,
    /// Roll it back: the workload decided so (TPC-C's New-Order with an unused item).
    RollBack,
}

/// Why a transaction's body stopped.
#[derive(Debug)]
pub enum BodyError {
    /// The peer said no: a lost conflict (the attempt aborts) or a failure (the run stops).
    Sql(SqlError),
    /// The data is not what the workload wrote: the run stops.
    Lab(LabError),
}

impl From<SqlError> for BodyError {
    fn from(e: SqlError) -> Self {
        BodyError::Sql(e)
    }
}

impl From<LabError> for BodyError {
    fn from(e: LabError) -> Self {
        BodyError::Lab(e)
    }
}

/// Runs one attempt of transaction type `kind`: begins it in `mode`, runs `body`, commits
/// (or rolls back as the body says). A lost conflict, in the body or at commit, rolls back
/// and is the attempt's outcome; anything else stops the run, naming `peer` and `what`.
pub fn attempt(
    session: &mut dyn Session,
    peer: PeerKind,
    what: &str,
    mode: TxnMode,
    kind: usize,
    body: impl FnOnce(&mut dyn Session) -> Result<Flow, BodyError>,
) -> Result<TxnOutcome, LabError> {
    session
        .begin(mode)
        .map_err(|e| e.in_peer(peer.name(), what))?;
    let mut tally = Tally {
        session,
        work: Work::default(),
    };
    let flow = body(&mut tally);
    let work = tally.work;
    let ended = match flow {
        Ok(Flow::Commit) => session
            .commit()
            .map(|()| TxnOutcome::Committed { kind, work }),
        Ok(Flow::RollBack) => session.rollback().map(|()| TxnOutcome::Aborted {
            kind,
            reason: AbortReason::ByWorkload,
        }),
        Err(error) => {
            // Whatever stopped the body, the transaction must not stay open.
            let _ = session.rollback();
            match error {
                BodyError::Sql(e) => Err(e),
                BodyError::Lab(e) => return Err(e),
            }
        }
    };
    match ended {
        Ok(outcome) => Ok(outcome),
        Err(SqlError::Abort(reason, _)) => Ok(TxnOutcome::Aborted { kind, reason }),
        Err(e) => Err(e.in_peer(peer.name(), what)),
    }
}

/// A session that counts what a transaction's statements did, as [`Work`] (docs/lab.md,
/// "Operations"): the rows queries returned and the rows statements changed; an `INSERT`
/// adds its rows to the live rows, a `DELETE` takes them away. A query that aggregates
/// counts the rows it returns, not those it read (TPC-C's Stock-Level returns one).
struct Tally<'s> {
    session: &'s mut dyn Session,
    work: Work,
}

impl Session for Tally<'_> {
    fn batch(&mut self, sql: &str) -> Result<(), SqlError> {
        self.session.batch(sql)
    }

    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, SqlError> {
        let changed = self.session.execute(sql, params)?;
        self.work.operations += changed;
        let statement = sql.trim_start();
        let starts = |word: &str| {
            statement
                .get(..word.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(word))
        };
        let changed_rows = i64::try_from(changed).unwrap_or(i64::MAX);
        if starts("INSERT") {
            self.work.rows_added += changed_rows;
        } else if starts("DELETE") {
            self.work.rows_added -= changed_rows;
        }
        Ok(changed)
    }

    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, SqlError> {
        let rows = self.session.query(sql, params)?;
        self.work.operations += rows.len() as u64;
        Ok(rows)
    }

    fn begin(&mut self, mode: TxnMode) -> Result<(), SqlError> {
        self.session.begin(mode)
    }

    fn commit(&mut self) -> Result<(), SqlError> {
        self.session.commit()
    }

    fn rollback(&mut self) -> Result<(), SqlError> {
        self.session.rollback()
    }
}

/// Runs `check` in a read-only transaction at snapshot isolation (the peers' consistency
/// checks read several tables and must see them at one instant).
pub fn at_one_snapshot<T>(
    session: &mut dyn Session,
    peer: PeerKind,
    what: &str,
    check: impl FnOnce(&mut dyn Session) -> Result<T, SqlError>,
) -> Result<T, LabError> {
    session
        .begin(TxnMode::ReadOnly(verso::Isolation::Snapshot))
        .map_err(|e| e.in_peer(peer.name(), what))?;
    match check(session) {
        Ok(value) => {
            session.commit().map_err(|e| e.in_peer(peer.name(), what))?;
            Ok(value)
        }
        Err(e) => {
            let _ = session.rollback();
            Err(e.in_peer(peer.name(), what))
        }
    }
}

/// The one row an update or insert of one row must change: anything else means the data
/// is not what the workload wrote.
pub fn one_row(changed: u64, what: impl FnOnce() -> String) -> Result<(), BodyError> {
    if changed == 1 {
        Ok(())
    } else {
        Err(BodyError::Lab(LabError::Inconsistent(format!(
            "{} changed {changed} rows, not 1",
            what()
        ))))
    }
}
