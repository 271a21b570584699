//! YCSB in SQL: one `SELECT` of the read fields or one `UPDATE` of the written ones per
//! operation, by primary key, all of a transaction's operations in one explicit
//! transaction. The operations, keys and bytes are drawn as Verso's worker draws them
//! ([`YcsbWorkload::draw_operations`]); an aborted transaction runs again with the same
//! operations, as in DBx1000. The read-only transactions of `--read-only-operations` run
//! at SERIALIZABLE, declared READ ONLY where the peer can be told (PostgreSQL), and are
//! retried until they commit, as Verso's are.

use verso::Isolation;

use crate::peers::sql::{Session, SqlType, SqlValue, TableDef, TxnMode};
use crate::peers::workloads::{at_one_snapshot, attempt, one_row, BodyError, Flow, SqlWorkload};
use crate::peers::PeerKind;
use crate::rng::SplitMix64;
use crate::workload::{LabError, OlapWorker, OltpWorker, QueryOutcome, TxnOutcome};
use crate::workloads::ycsb::{fill, Operation, YcsbWorkload, TABLE};

/// The statements of one shape, by first field: built once per worker.
struct Statements {
    reads: Vec<String>,
    updates: Vec<String>,
}

impl Statements {
    fn new(workload: &YcsbWorkload) -> Statements {
        let config = workload.config();
        let reads = (0..config.fields)
            .map(|first| {
                let columns: Vec<String> = workload
                    .fields_from(first, config.read_columns)
                    .map(|f| format!("field{f}"))
                    .collect();
                format!(
                    "SELECT {} FROM {TABLE} WHERE ycsb_key = $1",
                    columns.join(", ")
                )
            })
            .collect();
        let updates = (0..config.fields)
            .map(|first| {
                let sets: Vec<String> = workload
                    .fields_from(first, config.update_columns)
                    .enumerate()
                    .map(|(i, f)| format!("field{f} = ${}", i + 1))
                    .collect();
                format!(
                    "UPDATE {TABLE} SET {} WHERE ycsb_key = ${}",
                    sets.join(", "),
                    config.update_columns + 1
                )
            })
            .collect();
        Statements { reads, updates }
    }
}

/// Folds what a read returned, so that it cannot be optimized away.
fn fold(row: &[SqlValue]) -> u64 {
    row.iter().fold(0u64, |folded, value| match value {
        SqlValue::Bytes(bytes) => folded
            .wrapping_mul(31)
            .wrapping_add(u64::from(bytes.first().copied().unwrap_or(0)) ^ bytes.len() as u64),
        _ => folded,
    })
}

/// Reads row `key` with `sql`: it must be there (YCSB never deletes).
fn read_row(s: &mut dyn Session, sql: &str, key: u64) -> Result<u64, BodyError> {
    let rows = s.query(sql, &[SqlValue::Int(key as i64)])?;
    match rows.as_slice() {
        [row] => Ok(fold(row)),
        _ => Err(BodyError::Lab(LabError::Inconsistent(format!(
            "usertable row {key}: {} rows",
            rows.len()
        )))),
    }
}

impl SqlWorkload for YcsbWorkload {
    fn tables(&self) -> Vec<TableDef> {
        let config = self.config();
        let names: Vec<String> = (0..config.fields).map(|f| format!("field{f}")).collect();
        let mut columns: Vec<(&str, SqlType)> = vec![("ycsb_key", SqlType::BigInt)];
        columns.extend(names.iter().map(|n| (n.as_str(), SqlType::Bytes)));
        let mut table = TableDef::new(TABLE, &columns, &["ycsb_key"]);
        for index in 0..config.secondary_indexes {
            table = table.index(
                &format!("secondary{index}"),
                &[&format!("field{}", index % config.fields)],
            );
        }
        vec![table]
    }

    fn snapshot_read(&self) -> &'static str {
        "SELECT ycsb_key FROM usertable WHERE ycsb_key = 0"
    }

    fn oltp_worker<'a>(
        &'a self,
        session: Box<dyn Session>,
        peer: PeerKind,
        _worker: usize,
        _workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'a>, LabError> {
        Ok(Box::new(YcsbSqlWorker {
            session,
            peer,
            workload: self,
            statements: Statements::new(self),
            rng: SplitMix64::new(seed),
            operations: Vec::with_capacity(self.config().max_operations()),
            kind: 0,
            retry: false,
            values: vec![SqlValue::Null; self.config().update_columns + 1],
            checksum: 0,
        }))
    }

    fn olap_worker<'a>(
        &'a self,
        session: Box<dyn Session>,
        peer: PeerKind,
        _worker: usize,
        seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'a>>, LabError> {
        let Some(read_only) = self.config().read_only else {
            return Ok(None);
        };
        Ok(Some(Box::new(YcsbSqlReader {
            session,
            peer,
            workload: self,
            statements: Statements::new(self),
            operations: read_only.operations,
            declared: read_only.declared,
            rng: SplitMix64::new(seed),
            keys: Vec::with_capacity(read_only.operations),
            checksum: 0,
        })))
    }

    fn check_consistency(&self, session: &mut dyn Session, peer: PeerKind) -> Result<(), LabError> {
        let config = self.config();
        let wrong: Vec<String> = (0..config.fields)
            .map(|f| {
                format!(
                    "octet_length(field{f}) IS DISTINCT FROM {}",
                    config.field_bytes
                )
            })
            .collect();
        let sql = format!(
            "SELECT count(*), coalesce(min(ycsb_key), 0), coalesce(max(ycsb_key), -1), \
             (SELECT count(*) FROM {TABLE} WHERE {}) FROM {TABLE}",
            wrong.join(" OR ")
        );
        let row = at_one_snapshot(session, peer, "ycsb's consistency check", |s| {
            s.query_one(&sql, &[])
        })?;
        let int = |i: usize| row.get(i).and_then(SqlValue::as_i64).unwrap_or(i64::MIN);
        let rows = u64::try_from(int(0)).unwrap_or(u64::MAX);
        // The key is unique, so keys 0..rows-1 all present means min 0 and max rows - 1.
        let keys_in_place = int(1) == 0 && int(2) == rows as i64 - 1;
        let bad_rows = u64::try_from(int(3)).unwrap_or(u64::MAX) + u64::from(!keys_in_place);
        self.judge(rows, bad_rows).map_err(|e| match e {
            LabError::Inconsistent(what) => {
                LabError::Inconsistent(format!("{}: {what}", peer.name()))
            }
            other => other,
        })
    }
}

struct YcsbSqlWorker<'a> {
    session: Box<dyn Session>,
    peer: PeerKind,
    workload: &'a YcsbWorkload,
    statements: Statements,
    rng: SplitMix64,
    operations: Vec<Operation>,
    /// The type (size) of the transaction in `operations`.
    kind: usize,
    /// The previous attempt aborted: run the same operations again.
    retry: bool,
    /// An update's parameters, reused.
    values: Vec<SqlValue>,
    checksum: u64,
}

impl OltpWorker for YcsbSqlWorker<'_> {
    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        if !self.retry {
            self.kind = self
                .workload
                .draw_operations(&mut self.rng, &mut self.operations);
        }
        let config = self.workload.config();
        let (statements, operations, values) =
            (&self.statements, &self.operations, &mut self.values);
        let checksum = &mut self.checksum;
        let outcome = attempt(
            &mut *self.session,
            self.peer,
            "ycsb",
            TxnMode::ReadWrite(isolation),
            self.kind,
            |s| {
                for operation in operations {
                    match *operation {
                        Operation::Read { key, first } => {
                            let folded = read_row(s, &statements.reads[first], key)?;
                            *checksum = checksum.wrapping_add(folded);
                        }
                        Operation::Update { key, first, seed } => {
                            for (i, value) in values[..config.update_columns].iter_mut().enumerate()
                            {
                                let mut bytes = vec![0u8; config.field_bytes];
                                fill(&mut bytes, seed.wrapping_add(i as u64));
                                *value = SqlValue::Bytes(bytes);
                            }
                            values[config.update_columns] = SqlValue::Int(key as i64);
                            one_row(s.execute(&statements.updates[first], values)?, || {
                                format!("usertable row {key}'s update")
                            })?;
                        }
                    }
                }
                Ok(Flow::Commit)
            },
        )?;
        self.retry = matches!(outcome, TxnOutcome::Aborted { .. });
        std::hint::black_box(self.checksum);
        Ok(outcome)
    }
}

struct YcsbSqlReader<'a> {
    session: Box<dyn Session>,
    peer: PeerKind,
    workload: &'a YcsbWorkload,
    statements: Statements,
    operations: usize,
    declared: bool,
    rng: SplitMix64,
    keys: Vec<u64>,
    checksum: u64,
}

impl OlapWorker for YcsbSqlReader<'_> {
    fn run_one(&mut self) -> Result<QueryOutcome, LabError> {
        self.workload
            .draw_distinct_keys(&mut self.rng, self.operations, &mut self.keys);
        let fields = self.workload.config().fields as u64;
        let mode = if self.declared {
            TxnMode::ReadOnly(Isolation::Serializable)
        } else {
            TxnMode::ReadWrite(Isolation::Serializable)
        };
        loop {
            // The same keys on every try; each read's first field drawn anew, as Verso's.
            let firsts: Vec<usize> = self
                .keys
                .iter()
                .map(|_| self.rng.below(fields) as usize)
                .collect();
            let (keys, statements) = (&self.keys, &self.statements);
            let checksum = &mut self.checksum;
            let outcome = attempt(
                &mut *self.session,
                self.peer,
                "ycsb read-only",
                mode,
                0,
                |s| {
                    for (key, first) in keys.iter().zip(&firsts) {
                        let folded = read_row(s, &statements.reads[*first], *key)?;
                        *checksum = checksum.wrapping_add(folded);
                    }
                    Ok(Flow::Commit)
                },
            )?;
            if matches!(outcome, TxnOutcome::Committed { .. }) {
                break;
            }
        }
        std::hint::black_box(self.checksum);
        Ok(QueryOutcome {
            query: 0,
            scanned_tuples: self.operations as u64,
        })
    }
}
