//! Loading committed rows directly, for recovery's checkpoint load: no transaction, no
//! lookup before the insert, each row stamped while it is still in cache, and the
//! secondary indexes built afterwards, index by index, on several threads.
//!
//! Only for a database nobody else uses yet (recovery runs before `open` returns): the
//! rows appear committed at once, and nothing checks them against concurrent writers.

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::engine::{Engine, Table, WrittenRow};
use crate::error::{Error, Result};
use crate::gc::{Collector, Finalizing};
use crate::stats::Counter;
use crate::sync::Arc;
use crate::txn::slots::{Committed, LocalSlot};
use crate::txn::state::TxnShared;
use crate::value::Value;
use crate::version::{ChainEdit, VersionStorage};

/// The one committed "transaction" every loaded row belongs to.
pub(crate) struct LoadCommit {
    owner: Arc<TxnShared>,
    commit_ts: u64,
}

impl LoadCommit {
    /// Draws a commit timestamp for the load: every transaction begun after it sees the
    /// loaded rows.
    pub(crate) fn new<V: VersionStorage, G: Collector>(engine: &Engine<V, G>) -> Self {
        let owner = Arc::new(TxnShared::new());
        owner.mark_committing();
        let commit_ts = engine.txns.draw_commit_ts();
        owner.mark_committed(commit_ts);
        LoadCommit { owner, commit_ts }
    }
}

/// One thread's loader.
pub(crate) struct Loader<'e, V: VersionStorage, G: Collector> {
    engine: &'e Engine<V, G>,
    local: Rc<LocalSlot<WrittenRow<V>>>,
    commit: &'e LoadCommit,
    key: Vec<u8>,
    /// Rows whose version record the stamp could not fold: finalizing must see them.
    unfinalized: Vec<WrittenRow<V>>,
}

impl<'e, V: VersionStorage, G: Collector> Loader<'e, V, G> {
    pub(crate) fn new(engine: &'e Engine<V, G>, commit: &'e LoadCommit) -> Result<Self> {
        let local = engine.txns.local().ok_or_else(|| Error::CapacityExceeded {
            what: "threads using one database at once".into(),
            limit: crate::txn::slots::MAX_THREADS,
        })?;
        Ok(Loader {
            engine,
            local,
            commit,
            key: Vec::new(),
            unfinalized: Vec::new(),
        })
    }

    /// Loads one row into the table with this index, committed, without its secondary
    /// index entries ([`build_secondary_indexes`] adds them). Fails if the row does not
    /// fit the schema or its key is taken.
    pub(crate) fn load(&mut self, table_index: u32, values: &[Value]) -> Result<()> {
        let table = self
            .engine
            .table_by_index(table_index)
            .ok_or_else(|| Error::UnknownTable {
                name: format!("table index {table_index}"),
            })?;
        table.schema.check_row(values)?;
        crate::key::encode_row_key(&mut self.key, values, &table.schema.primary_key);
        let (row, created) = {
            let _space = self.engine.allocate_in_memory_space();
            let context = crate::version::NewRowContext {
                table: table_index,
                txn_id: self.commit.commit_ts,
                indexed: !table.schema.indexes.is_empty(),
            };
            V::insert_row(
                &self.engine.storage,
                context,
                values,
                &self.commit.owner,
                table.non_inline,
            )?
        };
        if table
            .primary
            .insert_if_absent(&self.key, Arc::clone(&row))
            .is_err()
        {
            // Never published: its version is no one's (the tile-block storage marks its
            // record obsolete, so that a collection does not weigh it as a row's newest).
            V::discard_unpublished(&row, &self.commit.owner);
            return Err(Error::DuplicateKey {
                table: table.schema.name.clone(),
            });
        }
        let stamped = V::stamp(&row, &self.commit.owner, self.commit.commit_ts);
        if let Some(gc) = &table.tuple_gc {
            gc.register(&self.key, Arc::clone(&row));
        }
        let stats = &self.local.slot.stats;
        stats.add(Counter::VersionsCreated, created.records as u64);
        stats.add(Counter::VersionBytesCreated, created.bytes as u64);
        stats.add(Counter::InsertRecordsFolded, stamped.folded_records as u64);
        stats.add(Counter::VersionBytesFreed, stamped.freed_bytes as u64);
        if !stamped.nothing_to_finalize {
            self.unfinalized.push(WrittenRow {
                table: table_index,
                row,
            });
        }
        Ok(())
    }
}

impl<V: VersionStorage, G: Collector> Drop for Loader<'_, V, G> {
    fn drop(&mut self) {
        // As a commit queues its rows: the collector finalizes what the stamp left.
        let rows = std::mem::take(&mut self.unfinalized);
        if !rows.is_empty() && !matches!(G::FINALIZING, Finalizing::Never | Finalizing::TupleLevel)
        {
            crate::engine::collect::enqueue_committed(
                &self.local,
                Committed::new(self.commit.commit_ts, rows),
            );
        }
    }
}

/// Builds every secondary index of every table from its rows, on `threads` threads (each
/// takes the next index). Returns the nanoseconds it took.
pub(crate) fn build_secondary_indexes<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    threads: usize,
) -> u64 {
    let began = Instant::now();
    let work: Vec<(&Table<V>, usize)> = engine
        .tables()
        .flat_map(|table| (0..table.schema.indexes.len()).map(move |index| (table, index)))
        .collect();
    let next = AtomicUsize::new(0);
    let build = || {
        let mut entry = Vec::new();
        while let Some(&(table, index)) = work.get(next.fetch_add(1, Ordering::Relaxed)) {
            build_one(table, index, &mut entry);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.clamp(1, work.len().max(1)) {
            scope.spawn(build);
        }
        build();
    });
    began.elapsed().as_nanos() as u64
}

/// Adds the entries of secondary index `index` for every row of `table`.
fn build_one<V: VersionStorage>(table: &Table<V>, index: usize, entry: &mut Vec<u8>) {
    crate::engine::txn::scan_in_batches(
        &table.primary,
        &std::ops::Bound::Unbounded,
        &std::ops::Bound::Unbounded,
        false,
        |_, row| {
            V::edit(row, |chain| {
                let (values, exists) = chain.values();
                if !exists {
                    return;
                }
                let exact = if table.physical_pointers {
                    V::newest_exact(chain)
                } else {
                    None
                };
                crate::engine::txn::add_secondary_entry(
                    table,
                    index,
                    row,
                    &values,
                    exact.as_ref(),
                    entry,
                );
            });
            true
        },
    );
}

/// Adopts what a storage that keeps its data itself recovered at open (the tile-block
/// storage, TB §4.5): its tables, created again in their order without being recorded
/// again; the clock moved past every transaction id in the data (so that no new
/// transaction reuses one, and ids keep ordering a key's records across restarts); each
/// key's newest committed version as a committed row in its primary index; the secondary
/// indexes built from them; then the collection a crash interrupted is finished
/// (Algorithm 3), through the indexes. Nothing for the other storages.
pub(crate) fn adopt_recovered<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    threads: usize,
) -> Result<()> {
    let Some(recovered) = V::take_recovered(&engine.storage) else {
        return Ok(());
    };
    for (name, schema) in recovered.tables {
        engine.create_recovered_table(&name, schema)?;
    }
    engine.txns.advance_clock_past(recovered.max_txn_id);
    for (table_index, key, row) in recovered.rows {
        let table = engine
            .table_by_index(table_index)
            .ok_or_else(|| Error::UnknownTable {
                name: format!("table index {table_index}"),
            })?;
        if table.primary.insert_if_absent(&key, row).is_err() {
            unreachable!("recovery gives one row per key");
        }
    }
    build_secondary_indexes(engine, threads);
    crate::engine::collect::finish_recovery(engine);
    Ok(())
}
