//! Opening a persistent database: create it, or recover it from its newest checkpoint and
//! the log after it.
//!
//! Recovery, in order:
//! 1. Lock the directory; read the manifest; remove leftovers of interrupted work
//!    (`MANIFEST.tmp`, `prepare-*.tmp`, checkpoint files the manifest does not name).
//! 2. Load the checkpoint the manifest names: its catalog creates the tables (in their
//!    original order, so table ids keep their positions), its rows are loaded committed
//!    on several threads, each taking the next block, into the primary indexes; then the
//!    secondary indexes are built from the rows, one index per thread at a time
//!    (`engine::load`).
//! 3. Replay the log from the manifest's position: segments in LSN order, each read up to
//!    where its successor says it ends; commit records are applied in batches of
//!    transactions, those below the checkpoint's snapshot idempotently (the checkpoint may
//!    hold them already: `durability::checkpoint`); table creations create their tables.
//!    A newest segment whose header is not whole (its creation was interrupted: records go
//!    into a segment only after its header and directory entry are synced) is removed.
//! 4. Decide how the log ends: cleanly (zeros or nothing), in a torn record (a write a
//!    crash interrupted: nothing in it was acknowledged; it is cut off), or in corruption
//!    (a bad record that a later sync point vouches for, or a segment that ends before its
//!    successor begins): `open` then refuses with [`Error::Corruption`] naming the file and
//!    offset, rather than drop acknowledged commits.
//! 5. Sync the last segment (records read from the page cache after a process crash become
//!    durable before anything can depend on them), move the clock above every recovered
//!    timestamp, and start the log in a new segment past the cut (`Log::start`).

use std::path::PathBuf;
use std::time::Instant;

use crate::durability::checkpoint::{self, CheckpointReader};
use crate::durability::log::{self, BadHeader, Log, SEGMENT_HEADER_BYTES};
use crate::durability::manifest::{self, Manifest, MANIFEST_TEMPORARY};
use crate::durability::record::{self, Op, OpBuffers, Record, ScanEnd};
use crate::durability::{
    io_error, open_directory, remove_if_present, Persistence, RecoveryStats, Settings,
};
use crate::engine::txn::EngineTxn;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::fs::OpenMode;
use crate::gc::Collector;
use crate::value::Value;
use crate::version::VersionStorage;
use crate::{Isolation, TableId};

/// Operations replayed in one engine transaction (replay runs alone, so batching many
/// logged transactions into one is safe, and saves their commits' work).
const REPLAY_BATCH_OPERATIONS: usize = 4096;

/// Opens or creates the persistent database of `settings` into `engine` (empty).
pub(crate) fn open<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    settings: &Settings,
) -> Result<Persistence> {
    let began = Instant::now();
    let (lock, manifest, names) = open_directory(settings)?;
    let fs = &*settings.fs;
    let dir = &settings.dir;
    for name in &names {
        if name == MANIFEST_TEMPORARY || (name.starts_with("prepare-") && name.ends_with(".tmp")) {
            remove_if_present(fs, &dir.join(name))?;
        }
    }
    let Some(manifest) = manifest else {
        return create(settings, lock, &names, began);
    };
    for name in &names {
        let named = manifest
            .checkpoint
            .as_ref()
            .is_some_and(|checkpoint| &checkpoint.file == name);
        if checkpoint::is_checkpoint_file(name) && !named {
            remove_if_present(fs, &dir.join(name))?;
        }
    }
    let mut stats = RecoveryStats::default();
    let mut snapshot = 0;
    if let Some(reference) = &manifest.checkpoint {
        let loading = Instant::now();
        let path = dir.join(&reference.file);
        let (reader, catalog) = CheckpointReader::open(fs, &path)?;
        stats.checkpoint_bytes = reader.len();
        if catalog.snapshot != reference.snapshot || catalog.log_from != manifest.log_from {
            return Err(Error::Corruption {
                file: path.display().to_string(),
                offset: 0,
                reason: format!(
                    "the checkpoint is of snapshot {} from LSN {}; the manifest names snapshot \
                     {} from LSN {}",
                    catalog.snapshot, catalog.log_from, reference.snapshot, manifest.log_from
                ),
            });
        }
        for (expected, (index, name, schema)) in catalog.tables.into_iter().enumerate() {
            let created = engine.create_table(&name, schema);
            match created {
                Ok(id) if id.index == index && index as usize == expected => {}
                Ok(_) | Err(_) => {
                    return Err(Error::Corruption {
                        file: path.display().to_string(),
                        offset: 0,
                        reason: format!(
                            "the catalog's table {name} (index {index}) cannot be created at \
                             position {expected}: {}",
                            created
                                .err()
                                .map_or("wrong position".into(), |e| e.to_string())
                        ),
                    });
                }
            }
        }
        stats.checkpoint_rows = checkpoint::load_rows(engine, &reader, settings.recovery_threads)?;
        snapshot = reference.snapshot;
        stats.checkpoint_load_nanos = loading.elapsed().as_nanos() as u64;
        // The loaded rows are in their primary indexes only; replay maintains every index.
        stats.index_build_nanos =
            crate::engine::load::build_secondary_indexes(engine, settings.recovery_threads);
    }

    let replaying = Instant::now();
    let mut segments: Vec<(u64, PathBuf)> = names
        .iter()
        .filter_map(|name| log::parse_segment_name(name).map(|start| (start, dir.join(name))))
        .collect();
    segments.sort();
    let spares: Vec<PathBuf> = names
        .iter()
        .filter(|name| log::is_spare_name(name))
        .map(|name| dir.join(name))
        .collect();
    let Some(first) = segments
        .iter()
        .rposition(|(start, _)| *start <= manifest.log_from)
    else {
        return Err(Error::Corruption {
            file: dir.display().to_string(),
            offset: manifest.log_from,
            reason: format!(
                "no log segment holds LSN {}, where the manifest says replay starts",
                manifest.log_from
            ),
        });
    };
    // Segments wholly below the checkpoint's position: their removal did not survive.
    for (_, path) in segments.drain(..first) {
        remove_if_present(fs, &path)?;
    }
    let mut headers = Vec::with_capacity(segments.len());
    for (i, (start, path)) in segments.iter().enumerate() {
        let header = read_header(settings, path).and_then(|header| {
            if header.start == *start {
                Ok(header)
            } else {
                Err(Error::Corruption {
                    file: path.display().to_string(),
                    offset: 0,
                    reason: format!(
                        "the header says the segment starts at LSN {}, its name says {start}",
                        header.start
                    ),
                })
            }
        });
        match header {
            Ok(header) => headers.push(header),
            // The newest segment was being created when the crash came: its name survived,
            // its header did not (it is written and synced before anything else goes in),
            // so it holds nothing. Not so for an older one: a segment is complete before
            // its successor is created.
            Err(Error::Corruption { .. }) if i + 1 == segments.len() && i > 0 => {
                remove_if_present(fs, path)?;
                stats.unfinished_segment_removed = true;
            }
            Err(error) => return Err(error),
        }
    }
    segments.truncate(headers.len());
    let mut replayer = Replayer {
        engine,
        txn: None,
        operations: 0,
        snapshot,
        max_ts: 0,
        buffers: OpBuffers::default(),
        stats: &mut stats,
    };
    let mut end_lsn = manifest.log_from;
    for (i, (start, path)) in segments.iter().enumerate() {
        let file = fs
            .open(path, OpenMode::Read)
            .map_err(|error| io_error(path, "opening a log segment", &error))?;
        let len = file
            .len()
            .map_err(|error| io_error(path, "reading a log segment's length", &error))?;
        let from = if i == 0 { manifest.log_from } else { *start };
        let skip = SEGMENT_HEADER_BYTES + (from - start);
        if skip > len.max(SEGMENT_HEADER_BYTES) {
            return Err(Error::Corruption {
                file: path.display().to_string(),
                offset: len,
                reason: format!("the segment ends before LSN {from}, where replay starts"),
            });
        }
        let mut bytes = vec![0; (len - skip.min(len)) as usize];
        file.read_exact_at(&mut bytes, skip)
            .map_err(|error| io_error(path, "reading a log segment", &error))?;
        replayer.stats.log_bytes_read += bytes.len() as u64;
        let stop = headers.get(i + 1).map(|next| next.previous_end);
        let file_name = path.display().to_string();
        let scan = record::scan_records(&bytes, from, stop, |lsn, body| {
            replayer.apply(body, || Error::Corruption {
                file: file_name.clone(),
                offset: SEGMENT_HEADER_BYTES + (lsn - start),
                reason: String::new(),
            })
        })?;
        end_lsn = scan.end_lsn;
        match scan.end {
            ScanEnd::Clean => {}
            ScanEnd::Torn => replayer.stats.torn_tail = true,
            ScanEnd::Corrupt { reason } => {
                return Err(Error::Corruption {
                    file: file_name,
                    offset: SEGMENT_HEADER_BYTES + (scan.end_lsn - start),
                    reason,
                })
            }
        }
    }
    let max_ts = replayer.max_ts;
    replayer.finish()?;
    stats.log_replay_nanos = replaying.elapsed().as_nanos() as u64;
    let (_, last) = segments.last().expect("the segment holding log_from");
    let last_file = fs
        .open(last, OpenMode::ReadWrite)
        .map_err(|error| io_error(last, "opening the last log segment", &error))?;
    last_file
        .sync_data()
        .map_err(|error| io_error(last, "syncing the last log segment", &error))?;
    drop(last_file);
    engine.txns.advance_clock_past(max_ts.max(snapshot));
    let start = end_lsn + record::ALIGN as u64;
    let log = Log::start(settings, start, end_lsn, segments, spares)?;
    stats.nanos = began.elapsed().as_nanos() as u64;
    Ok(Persistence::new(
        settings.clone(),
        lock,
        log,
        manifest,
        stats,
    ))
}

/// Creates a new database in the directory: the first segment, then the manifest (so a
/// manifest always finds its segment). Files of an earlier creation that crashed before
/// its manifest existed are removed: no commit can have been acknowledged in them.
fn create(
    settings: &Settings,
    lock: Box<dyn crate::fs::DirectoryLock>,
    names: &[String],
    began: Instant,
) -> Result<Persistence> {
    let fs = &*settings.fs;
    let dir = &settings.dir;
    for name in names {
        if log::parse_segment_name(name).is_some()
            || log::is_spare_name(name)
            || checkpoint::is_checkpoint_file(name)
        {
            remove_if_present(fs, &dir.join(name))?;
        }
    }
    let log = Log::start(settings, 0, 0, Vec::new(), Vec::new())?;
    let manifest = Manifest {
        checkpoint: None,
        log_from: 0,
    };
    manifest::write(fs, dir, &manifest, settings.syncs_directories())?;
    let stats = RecoveryStats {
        created: true,
        nanos: began.elapsed().as_nanos() as u64,
        ..RecoveryStats::default()
    };
    Ok(Persistence::new(
        settings.clone(),
        lock,
        log,
        manifest,
        stats,
    ))
}

fn read_header(settings: &Settings, path: &std::path::Path) -> Result<log::SegmentHeader> {
    let file = settings
        .fs
        .open(path, OpenMode::Read)
        .map_err(|error| io_error(path, "opening a log segment", &error))?;
    let mut bytes = vec![0; SEGMENT_HEADER_BYTES as usize];
    let n = file
        .read_at(&mut bytes, 0)
        .map_err(|error| io_error(path, "reading a log segment's header", &error))?;
    bytes.truncate(n);
    log::parse_segment_header(&bytes).map_err(|bad| match bad {
        BadHeader::Version(found) => Error::UnsupportedFormat {
            file: path.display().to_string(),
            found,
            supported: log::LOG_FORMAT_VERSION,
        },
        BadHeader::Invalid(reason) => Error::Corruption {
            file: path.display().to_string(),
            offset: 0,
            reason: reason.into(),
        },
    })
}

/// Applies log records to the engine.
struct Replayer<'e, 's, V: VersionStorage, G: Collector> {
    engine: &'e Engine<V, G>,
    txn: Option<EngineTxn<'e, V, G>>,
    operations: usize,
    snapshot: u64,
    max_ts: u64,
    buffers: OpBuffers,
    stats: &'s mut RecoveryStats,
}

impl<'e, V: VersionStorage, G: Collector> Replayer<'e, '_, V, G> {
    /// Applies one record's body; `at` makes the error for this record (its file and
    /// offset), to which the reason is added.
    fn apply(&mut self, body: &[u8], at: impl Fn() -> Error) -> Result<()> {
        let corrupt = |reason: String| match at() {
            Error::Corruption { file, offset, .. } => Error::Corruption {
                file,
                offset,
                reason,
            },
            other => other,
        };
        let decoded = record::decode_body(body)
            .map_err(|e| corrupt(format!("a valid record does not decode: {}", e.reason)))?;
        match decoded {
            Record::SyncPoint { .. } => Ok(()),
            Record::CreateTable {
                table,
                name,
                schema,
            } => {
                self.commit_batch()?;
                let count = self.engine.table_count() as u32;
                if table < count {
                    let existing = self.engine.table_names();
                    if existing.get(table as usize) != Some(&name) {
                        return Err(corrupt(format!(
                            "the log creates table {name} at index {table}, which holds {:?}",
                            existing.get(table as usize)
                        )));
                    }
                    return Ok(());
                }
                if table != count {
                    return Err(corrupt(format!(
                        "the log creates table {name} at index {table}; the next index is {count}"
                    )));
                }
                let id = self.engine.create_table(&name, schema).map_err(|e| {
                    corrupt(format!("the log's table {name} cannot be created: {e}"))
                })?;
                debug_assert_eq!(id.index, table);
                Ok(())
            }
            Record::Commit { commit_ts, mut ops } => {
                // Below the snapshot the checkpoint may already hold the commit, wholly or
                // in part: apply it idempotently.
                let idempotent = commit_ts < self.snapshot;
                if idempotent {
                    self.stats.log_commits_below_checkpoint += 1;
                }
                self.max_ts = self.max_ts.max(commit_ts);
                if self.txn.is_none() {
                    self.txn = Some(EngineTxn::begin(self.engine, Isolation::Snapshot, false)?);
                }
                let txn = self.txn.as_mut().expect("begun above");
                let tables = self.engine.table_count() as u32;
                loop {
                    let op = ops.next_op(&mut self.buffers).map_err(|e| {
                        corrupt(format!("an operation does not decode: {}", e.reason))
                    })?;
                    let Some(op) = op else { break };
                    let (Op::Insert { table } | Op::Update { table } | Op::Delete { table }) = op;
                    if table >= tables {
                        return Err(corrupt(format!(
                            "an operation on table index {table}; {tables} tables exist"
                        )));
                    }
                    let id = TableId {
                        index: table,
                        database: self.engine.tag,
                    };
                    let applied = match op {
                        Op::Insert { .. } => match txn.insert(id, &self.buffers.values) {
                            Err(Error::DuplicateKey { .. }) if idempotent => {
                                let table = self.engine.table(id)?;
                                let key = &table.schema.primary_key;
                                self.buffers.changes.clear();
                                for (column, value) in self.buffers.values.iter().enumerate() {
                                    if !key.contains(&column) {
                                        self.buffers.changes.push((column, value.clone()));
                                    }
                                }
                                let key_values: Vec<Value> = key
                                    .iter()
                                    .map(|&c| self.buffers.values[c].clone())
                                    .collect();
                                txn.update(id, &key_values, &self.buffers.changes)
                            }
                            other => other.map(|()| true),
                        },
                        Op::Update { .. } => {
                            txn.update(id, &self.buffers.values, &self.buffers.changes)
                        }
                        Op::Delete { .. } => txn.delete(id, &self.buffers.values),
                    }
                    .map(|done| done || idempotent);
                    match applied {
                        Ok(true) => {}
                        Ok(false) => {
                            return Err(corrupt(format!(
                                "the log changes a row of table index {table} that does not exist"
                            )))
                        }
                        Err(error) => {
                            return Err(corrupt(format!(
                                "an operation on table index {table} does not apply: {error}"
                            )))
                        }
                    }
                    self.operations += 1;
                    self.stats.log_operations_replayed += 1;
                }
                self.stats.log_commits_replayed += 1;
                if self.operations >= REPLAY_BATCH_OPERATIONS {
                    self.commit_batch()?;
                }
                Ok(())
            }
        }
    }

    fn commit_batch(&mut self) -> Result<()> {
        self.operations = 0;
        match self.txn.take() {
            Some(txn) => txn.commit(),
            None => Ok(()),
        }
    }

    fn finish(mut self) -> Result<()> {
        self.commit_batch()
    }
}
