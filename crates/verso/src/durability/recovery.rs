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
//!    into a segment only after its header and directory entry are synced) is removed,
//!    unless it holds the replay's start: then it must begin exactly there (a checkpoint
//!    taken while another thread created it), or `open` refuses.
//! 4. Decide how the log ends: cleanly (zeros or nothing), in a torn record (a write a
//!    crash interrupted: nothing in it was acknowledged; it is cut off), or in corruption
//!    (a bad record that a later sync point vouches for, or a segment that ends before its
//!    successor begins): `open` then refuses with [`Error::Corruption`] naming the file and
//!    offset, rather than drop acknowledged commits.
//! 5. Sync the last segment (records read from the page cache after a process crash become
//!    durable before anything can depend on them), move the clock above every recovered
//!    timestamp, and start the log in a new segment past the cut (`Log::start`).

use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
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
use crate::row::ValueRef;
use crate::value::Value;
use crate::version::VersionStorage;
use crate::{Isolation, TableId};

/// Operations replayed in one engine transaction (replay runs alone, so batching many
/// logged transactions into one is safe, and saves their commits' work).
const REPLAY_BATCH_OPERATIONS: usize = 4096;

/// Commit records a replay thread reads while its transaction is open before it commits
/// it, however few of their operations were its own: an open transaction holds back the
/// collectors' watermarks and the serializable protocols' commit history for every thread.
const REPLAY_BATCH_RECORDS: usize = 4096;

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
    let LogSegments {
        segments,
        headers,
        spares,
    } = log_segments(settings, &names, manifest.log_from, &mut stats)?;
    let (end_lsn, max_ts) = std::thread::scope(|scope| {
        let mut replay = Replay::start(scope, engine, snapshot, settings.log_replay_threads);
        let end_lsn = replay_segments(
            settings,
            &segments,
            &headers,
            manifest.log_from,
            &mut |segment, stats| replay.apply_segment(segment, stats),
            &mut stats,
        )?;
        let max_ts = replay.finish(&mut stats)?;
        Ok::<_, Error>((end_lsn, max_ts))
    })?;
    stats.log_replay_nanos = replaying.elapsed().as_nanos() as u64;
    engine.txns.advance_clock_past(max_ts.max(snapshot));
    let log = start_log_after(settings, segments, spares, end_lsn)?;
    stats.nanos = began.elapsed().as_nanos() as u64;
    Ok(Persistence::new(
        settings.clone(),
        lock,
        log,
        manifest,
        stats,
    ))
}

/// The log's segments recovery reads, from the one holding `log_from` on, oldest first,
/// with their headers, and the spare files: segments wholly below `log_from` (their
/// removal did not survive a crash) are removed, and so is a newest segment whose header is
/// not whole (its creation was interrupted before anything went into it).
pub(crate) fn log_segments(
    settings: &Settings,
    names: &[String],
    log_from: u64,
    stats: &mut RecoveryStats,
) -> Result<LogSegments> {
    let fs = &*settings.fs;
    let dir = &settings.dir;
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
    let Some(first) = segments.iter().rposition(|(start, _)| *start <= log_from) else {
        return Err(Error::Corruption {
            file: dir.display().to_string(),
            offset: log_from,
            reason: format!(
                "no log segment holds LSN {}, where the manifest says replay starts",
                log_from
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
            // its successor is created. Nor for the one holding `log_from` (a checkpoint
            // synced the log up to there, header first), unless it begins exactly at
            // `log_from`: a checkpoint whose position fell where another thread was
            // creating a segment released the segment before it and synced the directory
            // (the new name durable, its header not yet), and nothing in it was synced.
            Err(Error::Corruption { .. })
                if i + 1 == segments.len() && (i > 0 || *start == log_from) =>
            {
                remove_if_present(fs, path)?;
                stats.unfinished_segment_removed = true;
            }
            Err(error) => return Err(error),
        }
    }
    segments.truncate(headers.len());
    Ok(LogSegments {
        segments,
        headers,
        spares,
    })
}

/// What [`log_segments`] found.
pub(crate) struct LogSegments {
    /// From the one holding the replay's start on, oldest first: start LSN and path.
    pub(crate) segments: Vec<(u64, PathBuf)>,
    /// Their headers.
    pub(crate) headers: Vec<log::SegmentHeader>,
    /// Spare files, to become segments.
    pub(crate) spares: Vec<PathBuf>,
}

/// Syncs the last segment recovery read (records read from the page cache after a process
/// crash become durable before anything can depend on them) and starts the log in a new
/// segment past `end_lsn`, where the valid records end.
pub(crate) fn start_log_after(
    settings: &Settings,
    segments: Vec<(u64, PathBuf)>,
    spares: Vec<PathBuf>,
    end_lsn: u64,
) -> Result<Log> {
    let fs = &*settings.fs;
    // None left when the only one was an unfinished creation at `log_from`: the log ends
    // there.
    if let Some((_, last)) = segments.last() {
        let last_file = fs
            .open(last, OpenMode::ReadWrite)
            .map_err(|error| io_error(last, "opening the last log segment", &error))?;
        last_file
            .sync_data()
            .map_err(|error| io_error(last, "syncing the last log segment", &error))?;
    }
    // Past the cut, so no stale byte after it is read as part of the stream; with no
    // segment left none is, and the new segment must begin at `log_from` (`end_lsn`) for
    // the manifest to find it.
    let start = if segments.is_empty() {
        end_lsn
    } else {
        end_lsn + record::ALIGN as u64
    };
    Log::start(settings, start, end_lsn, segments, spares)
}

/// Reads the log's segments from `log_from` and hands their whole records to `apply`, a
/// segment at a time; returns the LSN where the valid records end.
pub(crate) fn replay_segments(
    settings: &Settings,
    segments: &[(u64, PathBuf)],
    headers: &[log::SegmentHeader],
    log_from: u64,
    apply: &mut dyn FnMut(&Arc<Segment>, &mut RecoveryStats) -> Result<()>,
    stats: &mut RecoveryStats,
) -> Result<u64> {
    let fs = &*settings.fs;
    let mut end_lsn = log_from;
    for (i, (start, path)) in segments.iter().enumerate() {
        let file = fs
            .open(path, OpenMode::Read)
            .map_err(|error| io_error(path, "opening a log segment", &error))?;
        let len = file
            .len()
            .map_err(|error| io_error(path, "reading a log segment's length", &error))?;
        let from = if i == 0 { log_from } else { *start };
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
        stats.log_bytes_read += bytes.len() as u64;
        let stop = headers.get(i + 1).map(|next| next.previous_end);
        let file_name: Arc<str> = path.display().to_string().into();
        // Framing and checksums first, on this thread; then the records found whole are
        // applied (before the scan's end is judged, so that an error in an earlier record
        // is the one reported, as when records were applied while scanned).
        let mut records = Vec::new();
        let scan = record::scan_records(&bytes, from, stop, |lsn, body| {
            let offset = body.as_ptr() as usize - bytes.as_ptr() as usize;
            records.push((lsn, offset..offset + body.len()));
            Ok::<(), Error>(())
        })?;
        let segment = Arc::new(Segment {
            bytes,
            records,
            file: Arc::clone(&file_name),
            start: *start,
        });
        apply(&segment, stats)?;
        end_lsn = scan.end_lsn;
        match scan.end {
            ScanEnd::Clean => {}
            ScanEnd::Torn => stats.torn_tail = true,
            ScanEnd::Corrupt { reason } => {
                return Err(Error::Corruption {
                    file: file_name.to_string(),
                    offset: SEGMENT_HEADER_BYTES + (scan.end_lsn - start),
                    reason,
                })
            }
        }
    }
    Ok(end_lsn)
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

/// Replays the log's records into the engine, on several threads.
///
/// The log is redo of logical operations, each naming its row by table and primary key;
/// a primary key is never updated (`Error::PrimaryKeyUpdate`) and secondary indexes are
/// not unique, so operations on different rows commute as far as the recovered state goes.
/// Replay therefore splits the operations by a hash of (table, primary key) over its
/// threads ([`row_owner`]): each thread reads every record of a run, in log order, and
/// applies the operations of its own rows only, in engine transactions of its own. The
/// threads live for the whole replay (a row's versions are allocated and freed by one
/// thread), and do no I/O: this thread reads the segments.
///
/// Invariants: every operation is applied by exactly one thread; a row's operations are
/// applied in log order (the order of their commits, `durability::log`), by one thread;
/// two threads never write the same row, so their transactions cannot conflict under any
/// protocol. A table creation is a barrier: the commits before it are applied (and their
/// transactions committed) by every thread before the table is created, and the commits
/// after it only then.
struct Replay<'scope, 'e, V: VersionStorage, G: Collector> {
    engine: &'e Engine<V, G>,
    /// One channel of runs per thread.
    runs: Vec<mpsc::Sender<Run>>,
    /// Every thread answers each run on it.
    answers: mpsc::Receiver<Answer>,
    handles: Vec<std::thread::ScopedJoinHandle<'scope, Answer>>,
    /// The largest commit timestamp replayed.
    max_ts: u64,
}

/// The whole records of one segment: its bytes after the header, and each record's LSN
/// and body (a range of `bytes`), in log order.
pub(crate) struct Segment {
    bytes: Vec<u8>,
    records: Vec<(u64, Range<usize>)>,
    /// For error offsets: the segment's file name and first LSN.
    file: Arc<str>,
    start: u64,
}

impl Segment {
    /// Each whole record's LSN and body, in log order.
    pub(crate) fn records(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.records
            .iter()
            .map(|(lsn, body)| (*lsn, &self.bytes[body.clone()]))
    }

    /// The error for the record at `lsn`, for `reason`.
    pub(crate) fn corruption(&self, lsn: u64, reason: String) -> Error {
        Error::Corruption {
            file: self.file.to_string(),
            offset: SEGMENT_HEADER_BYTES + (lsn - self.start),
            reason,
        }
    }

    /// The error `open` returns when a replay thread panicked while applying this segment
    /// (the panic itself goes on, through the scope).
    fn lost_thread(&self) -> Error {
        Error::Corruption {
            file: self.file.to_string(),
            offset: 0,
            reason: "a log replay thread panicked".into(),
        }
    }
}

/// Records `range` of a segment, holding no table creation, for every replay thread.
struct Run {
    segment: Arc<Segment>,
    range: Range<usize>,
    /// Commit what is applied before answering (a table creation follows).
    commit: bool,
}

/// What a replay thread did with a run, or its first error with the LSN of its record
/// (`u64::MAX` for a failed commit).
type Answer = std::result::Result<Replayed, (u64, Error)>;

/// What one replay thread did with a run of records.
#[derive(Default)]
struct Replayed {
    operations: u64,
    commits: u64,
    commits_below_checkpoint: u64,
    max_ts: u64,
}

impl<'scope, 'e: 'scope, V: VersionStorage, G: Collector> Replay<'scope, 'e, V, G> {
    /// Starts the replay threads in `scope`; `snapshot` is the checkpoint's (commits below
    /// it may be in the checkpoint already: applied idempotently).
    fn start<'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        engine: &'e Engine<V, G>,
        snapshot: u64,
        threads: usize,
    ) -> Self {
        let threads = threads.max(1);
        let (answer, answers) = mpsc::channel();
        let mut runs = Vec::with_capacity(threads);
        let mut handles = Vec::with_capacity(threads);
        for part in 0..threads {
            let (run_sender, run_receiver) = mpsc::channel::<Run>();
            let answer = answer.clone();
            runs.push(run_sender);
            handles.push(scope.spawn(move || {
                let mut worker = ReplayWorker {
                    engine,
                    snapshot,
                    part,
                    parts: threads,
                    txn: None,
                    operations_in_txn: 0,
                    records_in_txn: 0,
                    buffers: OpBuffers::default(),
                    key_columns: Vec::new(),
                    key_scratch: Vec::new(),
                    replayed: Replayed::default(),
                };
                for run in run_receiver {
                    // A panic is answered before it goes on (the scope reports it): this
                    // thread waits for every thread's answer.
                    let answered =
                        match std::panic::catch_unwind(AssertUnwindSafe(|| worker.run(&run))) {
                            Ok(answered) => answered,
                            Err(panic) => {
                                let _ = answer.send(Err((u64::MAX, run.segment.lost_thread())));
                                std::panic::resume_unwind(panic)
                            }
                        };
                    let failed = answered.is_err();
                    if answer.send(answered).is_err() || failed {
                        // The replay stopped (or will, at this error): apply nothing more.
                        return Ok(Replayed::default());
                    }
                }
                worker
                    .commit_batch()
                    .map(|()| Replayed::default())
                    .map_err(|error| (u64::MAX, error))
            }));
        }
        Replay {
            engine,
            runs,
            answers,
            handles,
            max_ts: 0,
        }
    }

    /// Applies the whole records of one segment.
    fn apply_segment(&mut self, segment: &Arc<Segment>, stats: &mut RecoveryStats) -> Result<()> {
        let records = &segment.records;
        let mut at = 0;
        while at < records.len() {
            let end = records[at..]
                .iter()
                .position(|(_, body)| {
                    segment.bytes[body.clone()].first() == Some(&record::KIND_CREATE_TABLE)
                })
                .map_or(records.len(), |run_len| at + run_len);
            let barrier = end < records.len();
            // Before a table creation every thread commits, even with no record to apply
            // (the creation may open a segment while transactions are open).
            if end > at || barrier {
                self.apply_run(segment, at..end, barrier, stats)?;
            }
            if barrier {
                let (lsn, body) = &records[end];
                self.create_table(&segment.bytes[body.clone()], |reason| {
                    segment.corruption(*lsn, reason)
                })?;
            }
            at = end + usize::from(barrier);
        }
        Ok(())
    }

    /// Hands records `range` of `segment` to every thread and waits for their answers;
    /// the first error in log order is the one reported.
    fn apply_run(
        &mut self,
        segment: &Arc<Segment>,
        range: Range<usize>,
        commit: bool,
        stats: &mut RecoveryStats,
    ) -> Result<()> {
        for runs in &self.runs {
            let run = Run {
                segment: Arc::clone(segment),
                range: range.clone(),
                commit,
            };
            // A thread ends early only by a panic, which the scope reports.
            if runs.send(run).is_err() {
                return Err(segment.lost_thread());
            }
        }
        let answers: Vec<Answer> = (0..self.runs.len())
            .map(|_| {
                self.answers
                    .recv()
                    .unwrap_or_else(|_| Err((u64::MAX, segment.lost_thread())))
            })
            .collect();
        self.merge(answers, stats)
    }

    /// Adds the threads' answers to `stats`, or returns the first error in log order.
    fn merge(&mut self, answers: Vec<Answer>, stats: &mut RecoveryStats) -> Result<()> {
        let mut first_error: Option<(u64, Error)> = None;
        for answer in answers {
            match answer {
                Ok(replayed) => {
                    stats.log_operations_replayed += replayed.operations;
                    stats.log_commits_replayed += replayed.commits;
                    stats.log_commits_below_checkpoint += replayed.commits_below_checkpoint;
                    self.max_ts = self.max_ts.max(replayed.max_ts);
                }
                Err((lsn, error)) => {
                    if first_error.as_ref().is_none_or(|(first, _)| lsn < *first) {
                        first_error = Some((lsn, error));
                    }
                }
            }
        }
        match first_error {
            Some((_, error)) => Err(error),
            None => Ok(()),
        }
    }

    /// Ends the threads (each commits what it applied last); returns the largest commit
    /// timestamp replayed.
    fn finish(mut self, stats: &mut RecoveryStats) -> Result<u64> {
        stats.log_replay_threads = self.runs.len() as u32;
        self.runs.clear();
        let answers: Vec<Answer> = std::mem::take(&mut self.handles)
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect();
        self.merge(answers, stats)?;
        Ok(self.max_ts)
    }

    /// Applies a table creation record (every thread has committed what came before).
    fn create_table(&self, body: &[u8], corrupt: impl Fn(String) -> Error) -> Result<()> {
        let decoded = record::decode_body(body)
            .map_err(|e| corrupt(format!("a valid record does not decode: {}", e.reason)))?;
        let Record::CreateTable {
            table,
            name,
            schema,
        } = decoded
        else {
            return Err(corrupt("a catalog record that creates no table".into()));
        };
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
        let id = self
            .engine
            .create_table(&name, schema)
            .map_err(|e| corrupt(format!("the log's table {name} cannot be created: {e}")))?;
        debug_assert_eq!(id.index, table);
        Ok(())
    }
}

/// Which of `parts` replay threads applies the operations on the row of `table` with
/// primary key `key` (in key column order): a hash of the key's encoding (tagged, so that
/// a NULL a damaged record might hold is hashed too, not refused here). The same row always
/// goes to the same thread. `scratch` is a reusable buffer.
fn row_owner<'v>(
    table: u32,
    key: impl Iterator<Item = &'v Value>,
    parts: usize,
    scratch: &mut Vec<u8>,
) -> usize {
    use std::hash::BuildHasher;
    scratch.clear();
    scratch.extend_from_slice(&table.to_le_bytes());
    for value in key {
        crate::key::encode_tagged(scratch, ValueRef::from(value));
    }
    let hash = foldhash::fast::FixedState::with_seed(0x2e91_a7c3).hash_one(&scratch[..]);
    (hash % parts as u64) as usize
}

/// One replay thread: applies the operations of its rows ([`row_owner`] = `part`).
struct ReplayWorker<'e, V: VersionStorage, G: Collector> {
    engine: &'e Engine<V, G>,
    snapshot: u64,
    part: usize,
    parts: usize,
    txn: Option<EngineTxn<'e, V, G>>,
    /// Operations applied in `txn`, and commit records read while it was open.
    operations_in_txn: usize,
    records_in_txn: usize,
    buffers: OpBuffers,
    /// Each table's primary key columns, looked up once (by table index).
    key_columns: Vec<Option<&'e [usize]>>,
    /// A row's key, encoded to find its owner.
    key_scratch: Vec<u8>,
    replayed: Replayed,
}

impl<'e, V: VersionStorage, G: Collector> ReplayWorker<'e, V, G> {
    /// Applies its share of `run` (and commits, if the run says so); says what it did.
    fn run(&mut self, run: &Run) -> Answer {
        let segment = &*run.segment;
        for (lsn, body) in &segment.records[run.range.clone()] {
            self.apply(&segment.bytes[body.clone()], |reason| {
                segment.corruption(*lsn, reason)
            })
            .map_err(|error| (*lsn, error))?;
        }
        if run.commit {
            self.commit_batch().map_err(|error| (u64::MAX, error))?;
        }
        Ok(std::mem::take(&mut self.replayed))
    }

    fn owns(&mut self, op: &Op, id: TableId) -> Result<bool> {
        if self.parts == 1 {
            return Ok(true);
        }
        let owner = match op {
            Op::Insert { .. } => {
                let index = id.index as usize;
                if self.key_columns.len() <= index {
                    self.key_columns.resize(index + 1, None);
                }
                let columns = match self.key_columns[index] {
                    Some(columns) => columns,
                    None => {
                        let columns = &self.engine.table(id)?.schema.primary_key[..];
                        self.key_columns[index] = Some(columns);
                        columns
                    }
                };
                // A row too short for its key is refused by the insert, on every thread.
                if columns.iter().any(|&c| c >= self.buffers.values.len()) {
                    return Ok(true);
                }
                row_owner(
                    id.index,
                    columns.iter().map(|&c| &self.buffers.values[c]),
                    self.parts,
                    &mut self.key_scratch,
                )
            }
            Op::Update { .. } | Op::Delete { .. } => row_owner(
                id.index,
                self.buffers.values.iter(),
                self.parts,
                &mut self.key_scratch,
            ),
        };
        Ok(owner == self.part)
    }

    /// Applies one record's body (never a table creation: those are barriers between
    /// runs); `corrupt` makes the error for this record (its file and offset) from a reason.
    fn apply(&mut self, body: &[u8], corrupt: impl Fn(String) -> Error) -> Result<()> {
        let decoded = record::decode_body(body)
            .map_err(|e| corrupt(format!("a valid record does not decode: {}", e.reason)))?;
        match decoded {
            Record::SyncPoint { .. } => Ok(()),
            Record::CreateTable { .. } => Err(corrupt(
                "a table creation inside a run of commits (replay splits runs at them)".into(),
            )),
            Record::Commit { commit_ts, mut ops } => {
                // Below the snapshot the checkpoint may already hold the commit, wholly or
                // in part: apply it idempotently.
                let idempotent = commit_ts < self.snapshot;
                // Every thread reads every commit; the first counts it.
                if self.part == 0 {
                    self.replayed.commits += 1;
                    if idempotent {
                        self.replayed.commits_below_checkpoint += 1;
                    }
                }
                self.replayed.max_ts = self.replayed.max_ts.max(commit_ts);
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
                    if !self.owns(&op, id)? {
                        continue;
                    }
                    if self.txn.is_none() {
                        self.txn = Some(EngineTxn::begin(self.engine, Isolation::Snapshot, false)?);
                    }
                    let txn = self.txn.as_mut().expect("begun above");
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
                    self.operations_in_txn += 1;
                    self.replayed.operations += 1;
                }
                if self.txn.is_some() {
                    self.records_in_txn += 1;
                }
                if self.operations_in_txn >= REPLAY_BATCH_OPERATIONS
                    || self.records_in_txn >= REPLAY_BATCH_RECORDS
                {
                    self.commit_batch()?;
                }
                Ok(())
            }
        }
    }

    fn commit_batch(&mut self) -> Result<()> {
        self.operations_in_txn = 0;
        self.records_in_txn = 0;
        match self.txn.take() {
            Some(txn) => txn.commit(),
            None => Ok(()),
        }
    }
}
