//! Checkpoints: every table as of one snapshot, written while writers keep running.
//!
//! A checkpoint is a long-running reader, the transaction Steam's eager pruning makes cheap:
//! under Steam it keeps at most one extra version per row written meanwhile; under
//! watermark-only it pins every version created while it runs.
//!
//! # Which snapshot, and where replay starts
//!
//! With the log's appends stopped for a moment ([`Log::with_appends_stopped`]), the
//! checkpoint reads the log's tail `P`, begins its snapshot `S` (the clock, published in
//! its thread's slot like any transaction's), and copies the catalog. Then:
//! - every commit with a timestamp `>= S` draws it (or, under MVTO, begins) after this
//!   moment and appends after it: its record lies at or after `P`, and replay from `P`
//!   applies it;
//! - a commit with a timestamp `< S` is in the checkpoint if it appended before `P`; one
//!   that appends at or after `P` (it drew its timestamp before `S` and was validating, or
//!   it is an MVTO transaction that began before `S` and commits at its start timestamp,
//!   possibly after the checkpoint read its rows) may be in the checkpoint wholly, in
//!   part (MVTO) or not at all. Replay applies those records too, *idempotently*: an
//!   insert of a row that exists sets its columns, an update or delete of a row that does
//!   not exist does nothing. Per key, the log's order is the commit order (a writer holds
//!   the row until its commit is visible, and appends before that), so replaying them and
//!   then the later records leaves every row as the last commit left it.
//!
//! The checkpoint reads without the protocol's read rules (no MVTO read timestamps, no
//! MV2PL locks, no recorded reads): it never aborts or delays a writer.
//!
//! # The file, and the order of writes
//!
//! `checkpoint-<S>-<P>.ckpt` (16 hex digits each): the magic bytes and format version,
//! then blocks
//! `| body length: u32 | crc32c(body): u32 | body |`. The first block is the catalog
//! (snapshot, `P`, the tables and their schemas by index), then blocks of rows (table, row
//! count, rows), then an end block (rows and blocks in all).
//!
//! 1. Write `checkpoint-<S>.tmp`, sync it, rename it to `.ckpt`, sync the directory.
//! 2. Make the log durable up to `P` (so that no hole below `P` can hide behind the
//!    manifest), then write the manifest naming the checkpoint and `P`
//!    (`durability::manifest`).
//! 3. Only then remove the previous checkpoint and release the log segments below `P`.
//!
//! A crash before step 2 ends leaves the previous manifest, whose checkpoint and log are
//! untouched; recovery removes the orphan.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use parking_lot::Mutex;

use crate::durability::codec::{self, Reader};
use crate::durability::manifest::{self, CheckpointRef, Manifest};
use crate::durability::{io_error, Persistence};
use crate::engine::load::{LoadCommit, Loader};
use crate::engine::txn::EngineTxn;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::fs::{File, FileSystem, OpenMode};
use crate::gc::Collector;
use crate::schema::TableSchema;
use crate::value::Value;
use crate::version::VersionStorage;
use crate::{KeyRange, TableId};

const MAGIC: &[u8; 8] = b"VERSOCKP";
/// The checkpoint's format version.
pub(crate) const CHECKPOINT_FORMAT_VERSION: u32 = 1;
const FILE_HEADER_BYTES: u64 = 12;
const BLOCK_CATALOG: u8 = 1;
const BLOCK_ROWS: u8 = 2;
const BLOCK_END: u8 = 3;
/// A block of rows is written once it holds about this many bytes.
const BLOCK_TARGET_BYTES: usize = 1 << 20;
/// The largest block a reader accepts (a block holds at least one row, and a row at most
/// 128 values of 16 MiB; a larger length is corruption).
const MAX_BLOCK_BYTES: u64 = 3 << 30;

/// A checkpoint's file name: its snapshot and log position, so that a new checkpoint never
/// has the name of the current one (which the durable manifest names until the new
/// manifest replaces it: `regression_a_second_checkpoint_at_the_same_snapshot_never_
/// replaces_the_named_file`).
pub(crate) fn file_name(snapshot: u64, log_from: u64) -> String {
    format!("checkpoint-{snapshot:016x}-{log_from:016x}.ckpt")
}

fn temporary_name(snapshot: u64, log_from: u64) -> String {
    format!("checkpoint-{snapshot:016x}-{log_from:016x}.tmp")
}

pub(crate) fn is_checkpoint_file(name: &str) -> bool {
    name.starts_with("checkpoint-") && (name.ends_with(".ckpt") || name.ends_with(".tmp"))
}

/// What one checkpoint did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Its snapshot.
    pub snapshot: u64,
    /// Rows written.
    pub rows: u64,
    /// Bytes of the file.
    pub bytes: u64,
    /// Nanoseconds from start to the manifest naming it.
    pub nanos: u64,
}

struct BlockWriter<'a> {
    file: &'a dyn File,
    path: &'a Path,
    offset: u64,
    body: Vec<u8>,
    blocks: u64,
}

impl BlockWriter<'_> {
    fn write_block(&mut self) -> Result<()> {
        let mut block = Vec::with_capacity(self.body.len() + 8);
        codec::put_u32(&mut block, self.body.len() as u32);
        codec::put_u32(&mut block, crc32c::crc32c(&self.body));
        block.extend_from_slice(&self.body);
        self.file
            .write_all_at(&block, self.offset)
            .map_err(|error| io_error(self.path, "writing a checkpoint", &error))?;
        self.offset += block.len() as u64;
        self.blocks += 1;
        self.body.clear();
        Ok(())
    }
}

/// Takes a checkpoint of `engine` (see the module documentation). One at a time.
pub(crate) fn take<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    persistence: &Persistence,
) -> Result<CheckpointReport> {
    let _one_at_a_time = persistence.checkpoint_lock.lock();
    let log = &persistence.log;
    log.check()?;
    let began = Instant::now();
    let (snapshot_txn, log_from, catalog) = log.with_appends_stopped(|tail| {
        let txn = EngineTxn::begin_plain_snapshot(engine)?;
        Ok::<_, Error>((txn, tail, engine.catalog()))
    })?;
    let snapshot = snapshot_txn.start_ts();
    let name = file_name(snapshot, log_from);
    {
        let current = persistence.manifest.lock();
        if current.log_from == log_from
            && current.checkpoint.as_ref().is_some_and(|c| c.file == name)
        {
            // Nothing was committed or logged since the current checkpoint: it is this one.
            return Ok(CheckpointReport {
                snapshot,
                nanos: began.elapsed().as_nanos() as u64,
                ..CheckpointReport::default()
            });
        }
    }
    let fs = &*persistence.fs;
    let dir = &persistence.dir;
    let temporary = dir.join(temporary_name(snapshot, log_from));
    let path = dir.join(&name);
    let written = write_file(
        fs,
        log,
        &temporary,
        &snapshot_txn,
        engine,
        snapshot,
        log_from,
        &catalog,
    );
    snapshot_txn.abort();
    // Nothing is renamed or written into the directory once the database is closed.
    let (rows, bytes) = match written.and_then(|done| log.check().map(|()| done)) {
        Ok(done) => done,
        Err(error) => {
            let _ = fs.remove_file(&temporary);
            return Err(error);
        }
    };
    fs.rename(&temporary, &path)
        .map_err(|error| io_error(&path, "renaming the checkpoint into place", &error))?;
    fs.sync_dir(dir)
        .map_err(|error| io_error(dir, "syncing the directory after a checkpoint", &error))?;
    if log.durability() != crate::Durability::None {
        if log.durable() < log_from {
            log.flush(true)?;
        }
    } else if log.written() < log_from {
        log.flush(false)?;
    }
    let previous = persistence.manifest.lock().clone();
    let manifest = Manifest {
        checkpoint: Some(CheckpointRef {
            file: name.clone(),
            snapshot,
        }),
        log_from,
    };
    manifest::write(fs, dir, &manifest, persistence.settings.syncs_directories())?;
    *persistence.manifest.lock() = manifest;
    if let Some(old) = previous.checkpoint.filter(|old| old.file != name) {
        let old = dir.join(old.file);
        fs.remove_file(&old)
            .map_err(|error| io_error(&old, "removing the previous checkpoint", &error))?;
    }
    log.release_below(log_from)?;
    persistence
        .checkpointed_from
        .store(log_from, Ordering::Release);
    persistence.checkpoint_bytes.store(bytes, Ordering::Relaxed);
    let report = CheckpointReport {
        snapshot,
        rows,
        bytes,
        nanos: began.elapsed().as_nanos() as u64,
    };
    persistence.record_checkpoint(report);
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn write_file<V: VersionStorage, G: Collector>(
    fs: &dyn FileSystem,
    log: &super::log::Log,
    path: &Path,
    txn: &EngineTxn<'_, V, G>,
    engine: &Engine<V, G>,
    snapshot: u64,
    log_from: u64,
    catalog: &[(u32, TableSchema)],
) -> Result<(u64, u64)> {
    let _ = fs.remove_file(path);
    let file = fs
        .open(path, OpenMode::CreateNew)
        .map_err(|error| io_error(path, "creating a checkpoint", &error))?;
    let mut header = MAGIC.to_vec();
    codec::put_u32(&mut header, CHECKPOINT_FORMAT_VERSION);
    file.write_all_at(&header, 0)
        .map_err(|error| io_error(path, "writing a checkpoint", &error))?;
    let mut writer = BlockWriter {
        file: &*file,
        path,
        offset: FILE_HEADER_BYTES,
        body: Vec::with_capacity(BLOCK_TARGET_BYTES + 4096),
        blocks: 0,
    };
    codec::put_u8(&mut writer.body, BLOCK_CATALOG);
    codec::put_u64(&mut writer.body, snapshot);
    codec::put_u64(&mut writer.body, log_from);
    codec::put_u32(&mut writer.body, catalog.len() as u32);
    for (index, schema) in catalog {
        codec::put_u32(&mut writer.body, *index);
        codec::put_schema(&mut writer.body, schema);
    }
    writer.write_block()?;
    let mut total_rows = 0u64;
    for (index, _) in catalog {
        let id = TableId {
            index: *index,
            database: engine.tag,
        };
        let writer = std::cell::RefCell::new(&mut writer);
        let rows_in_block = std::cell::Cell::new(0u32);
        let count_at = std::cell::Cell::new(0usize);
        let mut failed = None;
        txn.scan(
            id,
            &KeyRange::new(..),
            |row| {
                let mut writer = writer.borrow_mut();
                if writer.body.is_empty() {
                    codec::put_u8(&mut writer.body, BLOCK_ROWS);
                    codec::put_u32(&mut writer.body, *index);
                    count_at.set(writer.body.len());
                    codec::put_u32(&mut writer.body, 0);
                }
                codec::put_u16(&mut writer.body, row.len() as u16);
                for column in 0..row.len() {
                    codec::put_value(&mut writer.body, row.get(column));
                }
                rows_in_block.set(rows_in_block.get() + 1);
            },
            |()| {
                total_rows += 1;
                let mut writer = writer.borrow_mut();
                if writer.body.len() < BLOCK_TARGET_BYTES {
                    return true;
                }
                let at = count_at.get();
                writer.body[at..at + 4].copy_from_slice(&rows_in_block.replace(0).to_le_bytes());
                // A database closed meanwhile stops the checkpoint here (`close` waits
                // for it before it releases the directory).
                match log.check().and_then(|()| writer.write_block()) {
                    Ok(()) => true,
                    Err(error) => {
                        failed = Some(error);
                        false
                    }
                }
            },
        )?;
        if let Some(error) = failed {
            return Err(error);
        }
        let mut writer = writer.borrow_mut();
        if !writer.body.is_empty() {
            let at = count_at.get();
            writer.body[at..at + 4].copy_from_slice(&rows_in_block.replace(0).to_le_bytes());
            writer.write_block()?;
        }
    }
    codec::put_u8(&mut writer.body, BLOCK_END);
    codec::put_u64(&mut writer.body, total_rows);
    let blocks = writer.blocks;
    codec::put_u64(&mut writer.body, blocks);
    writer.write_block()?;
    file.sync_data()
        .map_err(|error| io_error(path, "syncing a checkpoint", &error))?;
    Ok((total_rows, writer.offset))
}

/// What a checkpoint's catalog block says.
pub(crate) struct CheckpointCatalog {
    pub(crate) snapshot: u64,
    pub(crate) log_from: u64,
    pub(crate) tables: Vec<(u32, String, crate::Schema)>,
}

/// Reads a checkpoint block by block. Any damage is corruption: a checkpoint was synced
/// whole before the manifest named it.
pub(crate) struct CheckpointReader {
    file: Box<dyn File>,
    name: String,
    len: u64,
    position: Mutex<ReadPosition>,
}

/// Where the readers are, under one mutex: the next block's offset, and the end block once
/// some reader met it (every later reader then learns that the rows are over; the end block
/// is checked once all are done). Reading the end block and recording it happen in one
/// step (`regression_loader_threads_racing_at_the_checkpoints_end_never_fail_a_recovery`).
struct ReadPosition {
    offset: u64,
    end: Option<(u64, Vec<u8>)>,
}

/// A block of rows, read and checked, not yet decoded.
pub(crate) struct RowsBlock {
    pub(crate) offset: u64,
    pub(crate) body: Vec<u8>,
}

impl CheckpointReader {
    /// The checkpoint file's length in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn open(fs: &dyn FileSystem, path: &Path) -> Result<(Self, CheckpointCatalog)> {
        let name = path.display().to_string();
        let file = fs
            .open(path, OpenMode::Read)
            .map_err(|error| io_error(path, "opening the checkpoint", &error))?;
        let len = file
            .len()
            .map_err(|error| io_error(path, "reading the checkpoint's length", &error))?;
        let mut header = [0u8; FILE_HEADER_BYTES as usize];
        if len < FILE_HEADER_BYTES {
            return Err(corrupt(&name, 0, "shorter than a checkpoint's header"));
        }
        file.read_exact_at(&mut header, 0)
            .map_err(|error| io_error(path, "reading the checkpoint", &error))?;
        if &header[..8] != MAGIC {
            return Err(corrupt(
                &name,
                0,
                "not a Verso checkpoint (wrong magic bytes)",
            ));
        }
        let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        if version != CHECKPOINT_FORMAT_VERSION {
            return Err(Error::UnsupportedFormat {
                file: name,
                found: version,
                supported: CHECKPOINT_FORMAT_VERSION,
            });
        }
        let reader = CheckpointReader {
            file,
            name,
            len,
            position: Mutex::new(ReadPosition {
                offset: FILE_HEADER_BYTES,
                end: None,
            }),
        };
        let (offset, body) = reader
            .next_block(&mut reader.position.lock())?
            .ok_or_else(|| corrupt(&reader.name, FILE_HEADER_BYTES, "no catalog block"))?;
        let catalog = decode_catalog(&body)
            .map_err(|e| corrupt(&reader.name, offset + 8 + e.offset as u64, &e.reason))?;
        Ok((reader, catalog))
    }

    /// The block at `position`, checked, and moves past it: `None` at the end of the file.
    fn next_block(&self, position: &mut ReadPosition) -> Result<Option<(u64, Vec<u8>)>> {
        let at = position.offset;
        if at == self.len {
            return Ok(None);
        }
        if at + 8 > self.len {
            return Err(corrupt(&self.name, at, "a block header runs past the end"));
        }
        let mut header = [0u8; 8];
        self.file
            .read_exact_at(&mut header, at)
            .map_err(|error| io_error(Path::new(&self.name), "reading the checkpoint", &error))?;
        let len = u64::from(u32::from_le_bytes(header[..4].try_into().expect("4")));
        let crc = u32::from_le_bytes(header[4..].try_into().expect("4"));
        if len > MAX_BLOCK_BYTES || at + 8 + len > self.len {
            return Err(corrupt(
                &self.name,
                at,
                &format!("a block of {len} bytes runs past the end"),
            ));
        }
        let mut body = vec![0; len as usize];
        self.file
            .read_exact_at(&mut body, at + 8)
            .map_err(|error| io_error(Path::new(&self.name), "reading the checkpoint", &error))?;
        position.offset = at + 8 + len;
        if crc32c::crc32c(&body) != crc {
            return Err(corrupt(&self.name, at, "a block's checksum does not match"));
        }
        Ok(Some((at, body)))
    }

    /// The next block of rows, or `None` once the end block is reached (by this caller or
    /// another; [`CheckpointReader::check_end`] checks it when every caller is done).
    pub(crate) fn next_rows(&self) -> Result<Option<RowsBlock>> {
        let mut position = self.position.lock();
        if position.end.is_some() {
            return Ok(None);
        }
        match self.next_block(&mut position)? {
            None => Err(corrupt(&self.name, self.len, "the end block is missing")),
            Some((offset, body)) => match body.first() {
                Some(&BLOCK_ROWS) => Ok(Some(RowsBlock { offset, body })),
                Some(&BLOCK_END) => {
                    position.end = Some((offset, body));
                    Ok(None)
                }
                _ => Err(corrupt(&self.name, offset, "an unknown block kind")),
            },
        }
    }

    /// Checks the end block against the rows and blocks read, and that nothing follows.
    pub(crate) fn check_end(&self, rows: u64, blocks: u64) -> Result<()> {
        let mut position = self.position.lock();
        let (offset, body) = position
            .end
            .take()
            .ok_or_else(|| corrupt(&self.name, self.len, "the end block is missing"))?;
        let mut reader = Reader::new(&body);
        let parsed = (|| {
            let kind = reader.u8("the block kind")?;
            let total = reader.u64("the row total")?;
            let written = reader.u64("the block total")?;
            Ok::<_, codec::DecodeError>((kind, total, written))
        })();
        match parsed {
            // The end block counts the catalog block and the blocks of rows.
            Ok((BLOCK_END, total, written)) if total == rows && written == blocks + 1 => {
                if self.next_block(&mut position)?.is_some() {
                    return Err(corrupt(&self.name, offset, "blocks after the end block"));
                }
                Ok(())
            }
            Ok((_, total, written)) => Err(corrupt(
                &self.name,
                offset,
                &format!(
                    "the end block counts {total} rows in {written} blocks; read {rows} rows in {} blocks",
                    blocks + 1
                ),
            )),
            Err(e) => Err(corrupt(&self.name, offset + 8 + e.offset as u64, &e.reason)),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

fn corrupt(file: &str, offset: u64, reason: &str) -> Error {
    Error::Corruption {
        file: file.to_owned(),
        offset,
        reason: reason.to_owned(),
    }
}

fn decode_catalog(body: &[u8]) -> codec::Decoded<CheckpointCatalog> {
    let mut reader = Reader::new(body);
    if reader.u8("the block kind")? != BLOCK_CATALOG {
        return reader.error("the first block is not the catalog");
    }
    let snapshot = reader.u64("the snapshot")?;
    let log_from = reader.u64("the log position")?;
    let count = reader.u32("the table count")?;
    let mut tables = Vec::new();
    for _ in 0..count {
        let index = reader.u32("a table index")?;
        let (name, schema) = reader.schema()?;
        tables.push((index, name, schema));
    }
    if !reader.is_empty() {
        return reader.error("bytes after the catalog");
    }
    Ok(CheckpointCatalog {
        snapshot,
        log_from,
        tables,
    })
}

/// Decodes a block of rows: its table, and each row into `row` for `each`.
pub(crate) fn for_each_row(
    block: &RowsBlock,
    file: &str,
    row: &mut Vec<Value>,
    mut each: impl FnMut(u32, &[Value]) -> Result<()>,
) -> Result<u64> {
    let mut reader = Reader::new(&block.body);
    let at = |e: codec::DecodeError| corrupt(file, block.offset + 8 + e.offset as u64, &e.reason);
    reader.u8("the block kind").map_err(at)?;
    let table = reader.u32("the table").map_err(at)?;
    let count = reader.u32("the row count").map_err(at)?;
    for _ in 0..count {
        reader.values_into(row).map_err(at)?;
        each(table, row)?;
    }
    if !reader.is_empty() {
        return Err(corrupt(
            file,
            block.offset + 8 + reader.position() as u64,
            "bytes after a block's rows",
        ));
    }
    Ok(u64::from(count))
}

/// Loads a checkpoint's rows into `engine` (whose tables exist), on `threads` threads:
/// each takes the next block and loads its rows committed (`engine::load`), without their
/// secondary index entries, which the caller builds next. Returns the rows.
pub(crate) fn load_rows<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    reader: &CheckpointReader,
    threads: usize,
) -> Result<u64> {
    let commit = LoadCommit::new(engine);
    let rows = std::sync::atomic::AtomicU64::new(0);
    let blocks = std::sync::atomic::AtomicU64::new(0);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let work = || -> Result<()> {
        let mut loader = Loader::new(engine, &commit)?;
        let mut values = Vec::new();
        while failure.lock().is_none() {
            let Some(block) = reader.next_rows()? else {
                return Ok(());
            };
            let count = for_each_row(&block, reader.name(), &mut values, |table, row| {
                loader.load(table, row).map_err(|error| {
                    corrupt(
                        reader.name(),
                        block.offset,
                        &format!("a row of table index {table} cannot be loaded: {error}"),
                    )
                })
            })?;
            rows.fetch_add(count, Ordering::Relaxed);
            blocks.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| {
                    if let Err(error) = work() {
                        failure.lock().get_or_insert(error);
                    }
                })
            })
            .collect();
        for handle in handles {
            if handle.join().is_err() {
                failure.lock().get_or_insert(Error::Corruption {
                    file: reader.name().to_owned(),
                    offset: 0,
                    reason: "a thread loading the checkpoint panicked".into(),
                });
            }
        }
    });
    if let Some(error) = failure.into_inner() {
        return Err(error);
    }
    let rows = rows.into_inner();
    reader.check_end(rows, blocks.into_inner())?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::SimulatedFileSystem;
    use proptest::prelude::*;
    use std::path::PathBuf;

    /// Reads a whole checkpoint as recovery does, with the rows decoded; never panics.
    fn read_all(bytes: &[u8]) -> Result<u64> {
        let fs = SimulatedFileSystem::new(0);
        fs.create_dir_all(Path::new("/c")).expect("dir");
        let path = PathBuf::from("/c/x.ckpt");
        let file = fs.open(&path, OpenMode::CreateNew).expect("file");
        file.write_all_at(bytes, 0).expect("write");
        let (reader, _catalog) = CheckpointReader::open(&fs, &path)?;
        let mut values = Vec::new();
        let (mut rows, mut blocks) = (0, 0);
        while let Some(block) = reader.next_rows()? {
            rows += for_each_row(&block, reader.name(), &mut values, |_, _| Ok(()))?;
            blocks += 1;
        }
        reader.check_end(rows, blocks)?;
        Ok(rows)
    }

    /// A valid checkpoint of a few rows, written by a database.
    fn valid_checkpoint() -> Vec<u8> {
        let fs = SimulatedFileSystem::new(1);
        let options = crate::Options::default()
            .path("/db")
            .file_system(std::sync::Arc::new(fs.clone()))
            .preallocate_log_segments(false)
            .checkpoint_after_log_bytes(None);
        let db = crate::Database::open(options).expect("open");
        let t = db
            .create_table(
                "t",
                crate::Schema::new()
                    .column("k", crate::ColumnType::U64)
                    .column("s", crate::ColumnType::Text)
                    .primary_key(&["k"]),
            )
            .expect("table");
        let mut txn = db.begin(crate::Isolation::Snapshot);
        for k in 0..5u64 {
            txn.insert(t, &[Value::U64(k), Value::Text("abc".into())])
                .expect("insert");
        }
        txn.commit().expect("commit");
        db.checkpoint().expect("checkpoint");
        let file = fs
            .files()
            .into_iter()
            .find(|f| f.to_string_lossy().ends_with(".ckpt"))
            .expect("a checkpoint file");
        fs.read_file(&file).expect("bytes")
    }

    #[test]
    fn a_valid_checkpoint_reads_whole() {
        assert_eq!(read_all(&valid_checkpoint()).expect("valid"), 5);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// Random bytes after a valid header: a typed error, never a panic.
        #[test]
        fn reading_arbitrary_checkpoint_bytes_never_panics(tail in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut bytes = MAGIC.to_vec();
            bytes.extend_from_slice(&CHECKPOINT_FORMAT_VERSION.to_le_bytes());
            bytes.extend_from_slice(&tail);
            let _ = read_all(&bytes);
        }
    }

    /// Every change of one byte of a valid checkpoint, and every truncation, is an error
    /// (CRCs, lengths and the end block's totals), never a panic or a wrong answer.
    #[test]
    fn every_mutation_of_a_valid_checkpoint_is_detected() {
        let valid = valid_checkpoint();
        for at in 0..valid.len() {
            for flip in [1u8, 0x80, 0xFF] {
                let mut bytes = valid.clone();
                bytes[at] ^= flip;
                assert!(
                    read_all(&bytes).is_err(),
                    "flipping byte {at} by {flip:#x} passed"
                );
            }
            assert!(read_all(&valid[..at]).is_err(), "cut at {at} passed");
        }
    }
}
