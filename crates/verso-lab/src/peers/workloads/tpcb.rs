//! pgbench's TPC-B-like transaction in SQL: pgbench's own five statements (builtin script
//! `tpcb-like`), in one explicit transaction, prepared once per connection.
//!
//! The tables are pgbench's with BIGINT ids and balances and TEXT fillers (pgbench's are INT
//! and CHAR(n); the fillers hold the same blank-padded text). `pgbench_history` has no key,
//! as in pgbench, and keeps Verso's `hid` column so that the rows are the same.

use verso::Isolation;

use crate::peers::sql::{Session, SqlType, SqlValue, TableDef, TxnMode};
use crate::peers::workloads::{at_one_snapshot, attempt, one_row, Flow, SqlWorkload};
use crate::peers::PeerKind;
use crate::rng::SplitMix64;
use crate::workload::{LabError, OltpWorker, TxnOutcome};
use crate::workloads::tpcb::{
    history_key, now_micros, TpcbInput, TpcbTotals, TpcbWorkload, ACCOUNTS, BRANCHES, HISTORY,
    TELLERS,
};

const UPDATE_ACCOUNT: &str = "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2";
const SELECT_ACCOUNT: &str = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";
const UPDATE_TELLER: &str = "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2";
const UPDATE_BRANCH: &str = "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2";
const INSERT_HISTORY: &str = "INSERT INTO pgbench_history (hid, tid, bid, aid, delta, mtime, \
                              filler) VALUES ($1, $2, $3, $4, $5, $6, NULL)";

const TOTALS: &str = "SELECT (SELECT count(*) FROM pgbench_accounts), \
     (SELECT count(*) FROM pgbench_tellers), (SELECT count(*) FROM pgbench_branches), \
     (SELECT count(*) FROM pgbench_history), \
     (SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts), \
     (SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers), \
     (SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches), \
     (SELECT coalesce(sum(delta), 0) FROM pgbench_history)";

impl SqlWorkload for TpcbWorkload {
    fn tables(&self) -> Vec<TableDef> {
        use SqlType::{BigInt, Text};
        vec![
            TableDef::new(
                BRANCHES,
                &[("bid", BigInt), ("bbalance", BigInt), ("filler", Text)],
                &["bid"],
            ),
            TableDef::new(
                TELLERS,
                &[
                    ("tid", BigInt),
                    ("bid", BigInt),
                    ("tbalance", BigInt),
                    ("filler", Text),
                ],
                &["tid"],
            ),
            TableDef::new(
                ACCOUNTS,
                &[
                    ("aid", BigInt),
                    ("bid", BigInt),
                    ("abalance", BigInt),
                    ("filler", Text),
                ],
                &["aid"],
            ),
            TableDef::new(
                HISTORY,
                &[
                    ("hid", BigInt),
                    ("tid", BigInt),
                    ("bid", BigInt),
                    ("aid", BigInt),
                    ("delta", BigInt),
                    ("mtime", BigInt),
                    ("filler", Text),
                ],
                &[],
            ),
        ]
    }

    fn snapshot_read(&self) -> &'static str {
        "SELECT bbalance FROM pgbench_branches WHERE bid = 1"
    }

    fn oltp_worker<'a>(
        &'a self,
        session: Box<dyn Session>,
        peer: PeerKind,
        worker: usize,
        _workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'a>, LabError> {
        Ok(Box::new(TpcbSqlWorker {
            session,
            peer,
            workload: self,
            rng: SplitMix64::new(seed),
            worker,
            history_sequence: 0,
        }))
    }

    fn check_consistency(&self, session: &mut dyn Session, peer: PeerKind) -> Result<(), LabError> {
        let row = at_one_snapshot(session, peer, "tpcb's consistency check", |s| {
            s.query_one(TOTALS, &[])
        })?;
        let int = |i: usize| row.get(i).and_then(SqlValue::as_i64).unwrap_or(i64::MIN);
        let count = |i: usize| u64::try_from(int(i)).unwrap_or(u64::MAX);
        self.judge(&TpcbTotals {
            accounts: count(0),
            tellers: count(1),
            branches: count(2),
            history: count(3),
            abalance: int(4),
            tbalance: int(5),
            bbalance: int(6),
            delta: int(7),
        })
        .map_err(|e| match e {
            LabError::Inconsistent(what) => {
                LabError::Inconsistent(format!("{}: {what}", peer.name()))
            }
            other => other,
        })
    }
}

struct TpcbSqlWorker<'a> {
    session: Box<dyn Session>,
    peer: PeerKind,
    workload: &'a TpcbWorkload,
    rng: SplitMix64,
    worker: usize,
    history_sequence: u64,
}

impl OltpWorker for TpcbSqlWorker<'_> {
    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        let TpcbInput {
            aid,
            bid,
            tid,
            delta,
        } = TpcbInput::draw(self.workload.config(), &mut self.rng);
        self.history_sequence += 1;
        let hid = history_key(self.worker, self.history_sequence);
        let (aid, bid, tid) = (aid as i64, bid as i64, tid as i64);
        let delta = SqlValue::Int(delta);
        attempt(
            &mut *self.session,
            self.peer,
            "tpcb",
            TxnMode::ReadWrite(isolation),
            0,
            |s| {
                one_row(
                    s.execute(UPDATE_ACCOUNT, &[delta.clone(), SqlValue::Int(aid)])?,
                    || format!("account {aid}'s update"),
                )?;
                let balance = s.query(SELECT_ACCOUNT, &[SqlValue::Int(aid)])?;
                std::hint::black_box(balance);
                one_row(
                    s.execute(UPDATE_TELLER, &[delta.clone(), SqlValue::Int(tid)])?,
                    || format!("teller {tid}'s update"),
                )?;
                one_row(
                    s.execute(UPDATE_BRANCH, &[delta.clone(), SqlValue::Int(bid)])?,
                    || format!("branch {bid}'s update"),
                )?;
                one_row(
                    s.execute(
                        INSERT_HISTORY,
                        &[
                            SqlValue::Int(hid as i64),
                            SqlValue::Int(tid),
                            SqlValue::Int(bid),
                            SqlValue::Int(aid),
                            delta.clone(),
                            SqlValue::Int(now_micros()),
                        ],
                    )?,
                    || "the history insert".to_owned(),
                )?;
                Ok(Flow::Commit)
            },
        )
    }
}
