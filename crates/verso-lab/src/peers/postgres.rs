//! PostgreSQL as a peer: a real server, reached over its Unix socket with the synchronous
//! `postgres` client.
//!
//! By default the lab starts a private server for the run ([`PrivateServer`]); with
//! `--postgres-url` it uses an existing one, in a schema of its own that it drops at the
//! end. Statements are prepared once per connection; transactions begin with
//! `BEGIN ISOLATION LEVEL REPEATABLE READ` (PostgreSQL's snapshot isolation) for Verso's
//! `snapshot` and `SERIALIZABLE` for `serializable`. The workload's tables are loaded with
//! `COPY`, then keyed and indexed and `VACUUM ANALYZE`d, as `pgbench -i` does.
//! Growth: `pg_total_relation_size` (heap, indexes, TOAST) of the workload's tables.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use postgres::types::{FromSql, IsNull, ToSql, Type};
use postgres::{Client, NoTls, Statement};
use verso::{Database, Isolation};

use super::cleanup::{self, Cleanup, Registration};
use super::sql::{Session, SqlError, SqlRow, SqlValue, TableDef, TxnMode};
use super::{Peer, PeerDescription, PeerKind};
use crate::workload::{AbortReason, LabError, LoadProgress};

/// The settings written into a private server's `postgresql.conf`, and why.
///
/// - `shared_buffers = 1GB`: room for TPC-B at scale 10 (about 160 MB) and its growth, so
///   the run measures versions, not the disk (beside Verso's disk engine, `--disk`, its
///   buffer pool's size instead: the same memory for pages on both sides);
/// - `synchronous_commit = off`: a commit does not wait for its WAL to reach the disk (it
///   is written within `wal_writer_delay`, 200 ms), the closest PostgreSQL comes to Verso's
///   in-memory commits without giving up crash consistency; `fsync` stays on. With Verso's
///   `--durability sync` the lab sets it `on` instead (a commit waits for its WAL flush);
/// - autovacuum on, with its shipped settings: the vacuum a user would have;
/// - no TCP at all: the server listens on a Unix socket in its own directory only.
pub const PRIVATE_SETTINGS: &[(&str, &str)] = &[
    ("shared_buffers", "'1GB'"),
    ("synchronous_commit", "off"),
    ("fsync", "on"),
    ("autovacuum", "on"),
    ("max_connections", "100"),
    ("listen_addresses", "''"),
];

/// The settings the report states, read back from the server (so that `--postgres-url`
/// reports what that server really uses).
const REPORTED_SETTINGS: &[&str] = &[
    "shared_buffers",
    "synchronous_commit",
    "fsync",
    "full_page_writes",
    "wal_level",
    "autovacuum",
    "autovacuum_naptime",
    "autovacuum_vacuum_scale_factor",
    "max_connections",
];

/// The port number in the socket's name (`.s.PGSQL.5432`); no TCP port is opened.
const SOCKET_PORT: u16 = 5432;

/// The role `initdb` creates for a private server.
const PRIVATE_USER: &str = "verso";

/// Where PostgreSQL's server programs are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binaries {
    /// The directory with `initdb`, `pg_ctl` and `postgres`.
    pub bin_dir: PathBuf,
}

/// How to install the server when it is missing.
pub const INSTALL_HINT: &str = "install the server (Debian or Ubuntu: `apt-get install \
     postgresql`; it puts them in /usr/lib/postgresql/<version>/bin), put its bin directory \
     on PATH, or give --postgres-url for a server that is already running";

impl Binaries {
    /// Finds `initdb` and `pg_ctl`: in `VERSO_PG_BIN` if set, else the newest
    /// `/usr/lib/postgresql/<version>/bin` (Debian's place), else on `PATH`.
    pub fn find() -> Result<Binaries, LabError> {
        let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
        if let Some(dir) = std::env::var_os("VERSO_PG_BIN") {
            let dir = PathBuf::from(dir);
            return if has_server(&dir) {
                Ok(Binaries { bin_dir: dir })
            } else {
                Err(LabError::Peer(format!(
                    "postgres: VERSO_PG_BIN={} has no initdb and pg_ctl: {INSTALL_HINT}",
                    dir.display()
                )))
            };
        }
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
                let bin = entry.path().join("bin");
                has_server(&bin).then_some((version, bin))
            })
            .collect();
        versions.sort();
        if let Some((_, bin_dir)) = versions.pop() {
            return Ok(Binaries { bin_dir });
        }
        if let Some(bin_dir) = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .find(|dir| has_server(dir))
        {
            return Ok(Binaries { bin_dir });
        }
        Err(LabError::Peer(format!(
            "postgres: PostgreSQL's server programs (initdb, pg_ctl) were not found in \
             /usr/lib/postgresql/*/bin or on PATH: {INSTALL_HINT}"
        )))
    }

    fn program(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }
}

/// The unprivileged user a server runs as when the lab runs as root (PostgreSQL refuses
/// root): `postgres`, which Debian's package creates. `None` when not root.
fn server_user() -> Result<Option<(u32, u32)>, LabError> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .map_err(|e| LabError::Peer(format!("postgres: cannot tell who runs the lab: {e}")))?;
    if uid != 0 {
        return Ok(None);
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.first() == Some(&"postgres") && fields.len() > 3)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
        .map(Some)
        .ok_or_else(|| {
            LabError::Peer(
                "postgres: the lab runs as root, PostgreSQL refuses to, and there is no \
                 `postgres` user to run it as (Debian's package creates one: `apt-get \
                 install postgresql`)"
                    .into(),
            )
        })
}

/// The first directory on the way to `dir` (itself included) that user `uid` may not enter:
/// neither its owner with the owner's search bit nor anyone with the others' one. (Group
/// permissions are not looked at: the postgres user's groups would have to be read too.)
fn unreachable_ancestor(dir: &Path, uid: u32) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dir = dir.canonicalize().ok()?;
    dir.ancestors()
        .find(|ancestor| {
            std::fs::metadata(ancestor).is_ok_and(|m| {
                let mode = m.mode();
                let by_owner = m.uid() == uid && mode & 0o100 != 0;
                !(by_owner || mode & 0o001 != 0)
            })
        })
        .map(Path::to_path_buf)
}

/// A PostgreSQL cluster the lab made for one run: `initdb` into a fresh directory, the
/// settings of [`PRIVATE_SETTINGS`], `pg_ctl start` on a Unix socket in that directory.
///
/// Invariant: while this value exists its directory exists and is registered with
/// [`cleanup`]; dropping it stops the server and removes the directory (so does an
/// interrupt), whether the run succeeded or not.
#[derive(Debug)]
pub struct PrivateServer {
    dir: PathBuf,
    data: PathBuf,
    binaries: Binaries,
    run_as: Option<(u32, u32)>,
    _registration: Registration,
}

impl PrivateServer {
    /// Makes and starts a server in a fresh directory under `parent`. Fails with what
    /// `initdb` or the server said; then nothing is left behind.
    pub fn start(
        binaries: &Binaries,
        parent: &Path,
        synchronous_commit: bool,
        shared_buffers_mib: Option<u64>,
    ) -> Result<PrivateServer, LabError> {
        let run_as = server_user()?;
        let dir = cleanup::fresh_dir(parent, "postgres")
            .map_err(|e| LabError::Peer(format!("postgres: {e}")))?;
        let data = dir.join("data");
        let server = PrivateServer {
            _registration: cleanup::register(Cleanup::StopPostgres {
                pg_ctl: binaries.program("pg_ctl"),
                data: data.clone(),
                dir: dir.clone(),
                run_as,
            }),
            dir,
            data,
            binaries: binaries.clone(),
            run_as,
        };
        // From here on, an early return drops `server`, which removes the directory.
        if let Some((uid, _)) = run_as {
            if let Some(blocked) = unreachable_ancestor(parent, uid) {
                return Err(server.failed(format!(
                    "the server runs as the postgres user, which cannot enter {} (no search \
                     permission for others); give a --peer-dir it can reach, such as /tmp",
                    blocked.display()
                )));
            }
        }
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&server.dir, Some(uid), Some(gid)).map_err(|e| {
                server.failed(format!(
                    "cannot give its directory to the postgres user: {e}"
                ))
            })?;
        }
        server.run(
            "initdb",
            &[
                "-D",
                &server.data.to_string_lossy(),
                "-U",
                PRIVATE_USER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
        )?;
        let mut conf =
            String::from("\n# Written by the Verso lab (crates/verso-lab/src/peers/postgres.rs)\n");
        for (name, value) in PRIVATE_SETTINGS {
            let value = match (*name, shared_buffers_mib) {
                ("synchronous_commit", _) if synchronous_commit => "on".to_owned(),
                ("shared_buffers", Some(mib)) => format!("'{mib}MB'"),
                _ => (*value).to_owned(),
            };
            let _ = writeln!(conf, "{name} = {value}");
        }
        let _ = writeln!(conf, "unix_socket_directories = '{}'", server.dir.display());
        let _ = writeln!(conf, "port = {SOCKET_PORT}");
        std::fs::OpenOptions::new()
            .append(true)
            .open(server.data.join("postgresql.conf"))
            .and_then(|mut file| file.write_all(conf.as_bytes()))
            .map_err(|e| server.failed(format!("cannot write postgresql.conf: {e}")))?;
        let log = server.dir.join("server.log");
        server
            .run(
                "pg_ctl",
                &[
                    "start",
                    "-w",
                    "-t",
                    "60",
                    "-s",
                    "-D",
                    &server.data.to_string_lossy(),
                    "-l",
                    &log.to_string_lossy(),
                ],
            )
            .map_err(|e| {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(5).collect();
                LabError::Peer(format!(
                    "{e}; the server's log ends: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                ))
            })?;
        Ok(server)
    }

    fn failed(&self, what: String) -> LabError {
        LabError::Peer(format!(
            "postgres: the private server in {}: {what}",
            self.dir.display()
        ))
    }

    /// Runs one of the server's programs as the server's user; its output becomes the
    /// error if it fails.
    fn run(&self, program: &str, args: &[&str]) -> Result<(), LabError> {
        let mut command = std::process::Command::new(self.binaries.program(program));
        command.args(args).current_dir(&self.dir);
        if let Some((uid, gid)) = self.run_as {
            use std::os::unix::process::CommandExt;
            command.uid(uid).gid(gid);
        }
        let output = command
            .output()
            .map_err(|e| self.failed(format!("cannot run {program}: {e}")))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(self.failed(format!(
                "{program} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )))
        }
    }

    /// The directory that holds the data directory, the socket and the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The client configuration that reaches this server.
    fn client_config(&self) -> postgres::Config {
        let mut config = postgres::Config::new();
        config
            .host_path(&self.dir)
            .port(SOCKET_PORT)
            .user(PRIVATE_USER)
            .dbname("postgres")
            .application_name("verso-lab");
        config
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        cleanup::stop_postgres(&self.binaries.program("pg_ctl"), &self.data, self.run_as);
        cleanup::remove_dir(&self.dir);
    }
}

/// Where the workload's tables live on the server.
enum Home {
    /// A private server, torn down with the peer (its `public` schema).
    Private {
        /// Kept for its `Drop`, which stops the server.
        _server: PrivateServer,
    },
    /// An existing server (`--postgres-url`): a schema of the lab's own, dropped at the
    /// end.
    Schema(String),
}

/// PostgreSQL, opened for one run.
pub struct PostgresPeer {
    config: postgres::Config,
    /// The sampler's connection (growth) and the loader's.
    monitor: Mutex<Client>,
    description: PeerDescription,
    // Dropped last: the connections above close before the server stops.
    home: Home,
}

fn connect_error(e: &postgres::Error, target: &str) -> LabError {
    LabError::Peer(format!("postgres: cannot connect to {target}: {e}"))
}

impl PostgresPeer {
    /// Starts a private server under `parent` and connects to it.
    /// `synchronous_commit`: on instead of the lab's off; `shared_buffers_mib`: that
    /// instead of the lab's 1 GB (see [`PRIVATE_SETTINGS`]).
    pub fn start_private(
        parent: &Path,
        synchronous_commit: bool,
        shared_buffers_mib: Option<u64>,
    ) -> Result<PostgresPeer, LabError> {
        let binaries = Binaries::find()?;
        let server =
            PrivateServer::start(&binaries, parent, synchronous_commit, shared_buffers_mib)?;
        let config = server.client_config();
        let monitor = config
            .connect(NoTls)
            .map_err(|e| connect_error(&e, "the private server"))?;
        let mut peer = PostgresPeer {
            config,
            monitor: Mutex::new(monitor),
            description: PeerDescription::default(),
            home: Home::Private { _server: server },
        };
        peer.describe(
            "a private server the lab started for this run (initdb into a fresh \
                       directory, Unix socket only), stopped and removed after it",
        )?;
        Ok(peer)
    }

    /// Connects to the server at `url` (a libpq connection string or URL) and makes a
    /// fresh schema for the run. Fails at once if the server cannot be reached.
    pub fn connect_existing(url: &str) -> Result<PostgresPeer, LabError> {
        let mut config: postgres::Config = url.parse().map_err(|e| {
            LabError::BadOption(format!(
                "--postgres-url {url:?} is not a connection string: {e}"
            ))
        })?;
        config.connect_timeout(std::time::Duration::from_secs(10));
        let mut monitor = config
            .connect(NoTls)
            .map_err(|e| connect_error(&e, &format!("--postgres-url {url:?}")))?;
        let schema = format!(
            "verso_lab_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros())
        );
        monitor
            .batch_execute(&format!(
                "CREATE SCHEMA {schema}; SET search_path TO {schema}"
            ))
            .map_err(|e| LabError::Peer(format!("postgres: cannot create schema {schema}: {e}")))?;
        config.options(&format!("-c search_path={schema}"));
        let mut peer = PostgresPeer {
            config,
            monitor: Mutex::new(monitor),
            description: PeerDescription::default(),
            home: Home::Schema(schema.clone()),
        };
        peer.describe(&format!(
            "an existing server (--postgres-url), in schema {schema}, dropped after the run"
        ))?;
        Ok(peer)
    }

    /// Reads the version and settings back from the server.
    fn describe(&mut self, where_it_runs: &str) -> Result<(), LabError> {
        let mut monitor = self.monitor.lock().map_err(|_| poisoned())?;
        let version: String = monitor
            .query_one("SELECT version()", &[])
            .and_then(|row| row.try_get(0))
            .map_err(|e| LabError::Peer(format!("postgres: cannot read its version: {e}")))?;
        let short_version = version.split(" on ").next().unwrap_or(&version).to_owned();
        let mut settings = String::new();
        for name in REPORTED_SETTINGS {
            let value: String = monitor
                .query_one(&format!("SHOW {name}"), &[])
                .and_then(|row| row.try_get(0))
                .map_err(|e| LabError::Peer(format!("postgres: SHOW {name}: {e}")))?;
            let _ = write!(
                settings,
                "{}{name}={value}",
                if settings.is_empty() { "" } else { ", " }
            );
        }
        let synchronous_commit_off = settings.contains("synchronous_commit=off");
        let _ = write!(settings, "; {where_it_runs}");
        drop(monitor);
        self.description = PeerDescription {
            version: short_version,
            settings,
            durability: if synchronous_commit_off {
                "WAL with fsync, but synchronous_commit=off: a commit returns before its WAL \
                 reaches the disk, so a crash may lose the last fraction of a second of \
                 commits (never consistency), like Verso's --durability async; compare \
                 with the durability each Verso run states"
                    .to_owned()
            } else {
                "WAL flushed at every commit (synchronous_commit on): every commit survives a \
                 crash, like Verso's --durability sync; compare with the durability each \
                 Verso run states"
                    .to_owned()
            },
            growth_measure: "pg_total_relation_size of the workload's tables (heap, indexes, \
                             TOAST): dead row versions that vacuum may not remove yet"
                .to_owned(),
        };
        Ok(())
    }
}

fn poisoned() -> LabError {
    LabError::Peer("postgres: a thread panicked while using the monitor connection".into())
}

impl Drop for PostgresPeer {
    fn drop(&mut self) {
        if let Home::Schema(schema) = &self.home {
            if let Ok(mut monitor) = self.monitor.lock() {
                let _ = monitor.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
            }
        }
    }
}

/// Writes one value in COPY's text format.
fn copy_text(out: &mut String, value: &SqlValue) {
    match value {
        SqlValue::Null => out.push_str("\\N"),
        SqlValue::Int(i) => {
            let _ = write!(out, "{i}");
        }
        // `{:?}` prints the shortest text that reads back as the same f64.
        SqlValue::Float(f) => {
            let _ = write!(out, "{f:?}");
        }
        SqlValue::Text(text) => {
            for c in text.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\t' => out.push_str("\\t"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    c => out.push(c),
                }
            }
        }
        SqlValue::Bytes(bytes) => {
            // bytea's hex form, its backslash doubled for COPY.
            out.push_str("\\\\x");
            for b in bytes {
                let _ = write!(out, "{b:02x}");
            }
        }
    }
}

impl Peer for PostgresPeer {
    fn kind(&self) -> PeerKind {
        PeerKind::Postgres
    }

    fn description(&self) -> &PeerDescription {
        &self.description
    }

    fn isolation_name(&self, isolation: Isolation) -> String {
        match isolation {
            Isolation::Snapshot => "REPEATABLE READ (PostgreSQL's snapshot isolation; \
                                    first updater wins)"
                .to_owned(),
            Isolation::Serializable => "SERIALIZABLE (SSI)".to_owned(),
        }
    }

    fn connect(&self) -> Result<Box<dyn Session>, LabError> {
        let client = self
            .config
            .connect(NoTls)
            .map_err(|e| connect_error(&e, "the server"))?;
        Ok(Box::new(PostgresSession {
            client,
            statements: HashMap::new(),
        }))
    }

    fn load(
        &self,
        tables: &[TableDef],
        source: &Database,
        progress: &dyn LoadProgress,
    ) -> Result<(), LabError> {
        let mut client = self.monitor.lock().map_err(|_| poisoned())?;
        let fail =
            |doing: String, e: postgres::Error| LabError::Peer(format!("postgres: {doing}: {e}"));
        for table in tables {
            client
                .batch_execute(&table.create_sql(super::sql::Dialect::Postgres, false))
                .map_err(|e| fail(format!("CREATE TABLE {}", table.name), e))?;
            let columns: Vec<&str> = table.columns.iter().map(|(c, _)| c.as_str()).collect();
            let mut writer = client
                .copy_in(&format!(
                    "COPY {} ({}) FROM STDIN",
                    table.name,
                    columns.join(", ")
                ))
                .map_err(|e| fail(format!("COPY {}", table.name), e))?;
            let mut line = String::new();
            let mut write_error = None;
            super::for_each_row(source, table, progress, |row| {
                line.clear();
                for (i, value) in row.iter().enumerate() {
                    if i > 0 {
                        line.push('\t');
                    }
                    copy_text(&mut line, value);
                }
                line.push('\n');
                match writer.write_all(line.as_bytes()) {
                    Ok(()) => true,
                    Err(e) => {
                        write_error = Some(e);
                        false
                    }
                }
            })?;
            if let Some(e) = write_error {
                return Err(LabError::Peer(format!(
                    "postgres: COPY {}: {e}",
                    table.name
                )));
            }
            writer
                .finish()
                .map_err(|e| fail(format!("COPY {}", table.name), e))?;
            let mut ddl: Vec<String> = table.add_key_sql().into_iter().collect();
            ddl.extend(table.index_sql());
            for statement in ddl {
                client
                    .batch_execute(&statement)
                    .map_err(|e| fail(statement.clone(), e))?;
            }
        }
        // As `pgbench -i` does: a clean start, with statistics for the planner.
        for table in tables {
            client
                .batch_execute(&format!("VACUUM ANALYZE {}", table.name))
                .map_err(|e| fail(format!("VACUUM ANALYZE {}", table.name), e))?;
        }
        // The measured run starts from the loaded data on disk, as Verso's and SQLite's
        // do (each checkpoints after its load), not with the load's pages still to be
        // written back.
        client.batch_execute("CHECKPOINT").map_err(|e| {
            fail(
                "CHECKPOINT after the load (the role needs superuser or pg_checkpoint)".into(),
                e,
            )
        })?;
        Ok(())
    }

    fn growth_bytes(&self, tables: &[TableDef]) -> Option<u64> {
        let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        let mut client = self.monitor.lock().ok()?;
        let row = client
            .query_one(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint \
                 FROM pg_class c WHERE c.relkind = 'r' \
                 AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) \
                 AND c.relname = ANY($1)",
                &[&names],
            )
            .ok()?;
        let bytes: i64 = row.try_get(0).ok()?;
        u64::try_from(bytes).ok()
    }

    /// From the catalogs and the statistics views: the workload tables' main forks
    /// (`pg_relation_size`) and indexes (`pg_indexes_size`) in 8 KiB pages, their
    /// `n_dead_tup` and vacuum counts (`pg_stat_user_tables`), the database's
    /// `blks_read` and `blks_hit` (`pg_stat_database`), and the buffers written
    /// (`pg_stat_io`, or before PostgreSQL 16 the checkpointer's, background writer's and
    /// backends' in `pg_stat_bgwriter`: the whole server, which runs only this workload). PostgreSQL does not tell sequential writes
    /// apart, so none are counted. Its statistics reach the views within about a second.
    fn storage_stats(&self, tables: &[TableDef]) -> Option<verso::DiskStats> {
        let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        let mut client = self.monitor.lock().ok()?;
        let row = client
            .query_one(
                "SELECT \
                   (SELECT coalesce(sum(pg_relation_size(c.oid)), 0)::bigint FROM pg_class c \
                    WHERE c.relkind = 'r' AND c.relnamespace = \
                      (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) \
                    AND c.relname = ANY($1)), \
                   (SELECT coalesce(sum(pg_indexes_size(c.oid)), 0)::bigint FROM pg_class c \
                    WHERE c.relkind = 'r' AND c.relnamespace = \
                      (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) \
                    AND c.relname = ANY($1)), \
                   (SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables \
                    WHERE schemaname = current_schema() AND relname = ANY($1)), \
                   (SELECT coalesce(sum(vacuum_count + autovacuum_count), 0)::bigint \
                    FROM pg_stat_user_tables \
                    WHERE schemaname = current_schema() AND relname = ANY($1)), \
                   (SELECT blks_read FROM pg_stat_database WHERE datname = current_database()), \
                   (SELECT blks_hit FROM pg_stat_database WHERE datname = current_database())",
                &[&names],
            )
            .ok()?;
        // Buffers written: `pg_stat_io` from PostgreSQL 16 (17 dropped the bgwriter
        // view's backend and checkpoint counts), else `pg_stat_bgwriter`.
        let written: Option<i64> = client
            .query_one(
                "SELECT coalesce(sum(writes), 0)::bigint FROM pg_stat_io",
                &[],
            )
            .or_else(|_| {
                client.query_one(
                    "SELECT (buffers_checkpoint + buffers_clean + buffers_backend)::bigint \
                     FROM pg_stat_bgwriter",
                    &[],
                )
            })
            .ok()
            .and_then(|row| row.try_get(0).ok());
        let get = |i: usize| -> Option<u64> {
            let value: i64 = row.try_get(i).ok()?;
            u64::try_from(value).ok()
        };
        let page = verso::disk::PAGE_SIZE as u64;
        let mut stats = verso::DiskStats::default();
        stats.heap_pages = get(0)? / page;
        stats.index_pages = get(1)? / page;
        stats.dead_tuples = get(2)?;
        stats.vacuums = get(3)?;
        stats.buffer_pool.misses = get(4)?;
        stats.buffer_pool.pages_read = get(4)?;
        stats.buffer_pool.hits = get(5)?;
        stats.buffer_pool.pages_written = written.and_then(|w| u64::try_from(w).ok())?;
        Some(stats)
    }
}

/// One connection, with its prepared statements.
struct PostgresSession {
    client: Client,
    statements: HashMap<String, Statement>,
}

/// What PostgreSQL's error means for the transaction.
fn classify(error: postgres::Error) -> SqlError {
    use postgres::error::SqlState;
    let message = match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => error.to_string(),
    };
    match error.code() {
        // 40001 is both REPEATABLE READ's "could not serialize access due to concurrent
        // update" (a write-write conflict, first updater wins) and SERIALIZABLE's
        // read/write-dependency failure.
        Some(code) if *code == SqlState::T_R_SERIALIZATION_FAILURE => {
            if message.contains("concurrent update") || message.contains("concurrent delete") {
                SqlError::Abort(AbortReason::WriteConflict, message)
            } else {
                SqlError::Abort(AbortReason::Serialization, message)
            }
        }
        Some(code) if *code == SqlState::T_R_DEADLOCK_DETECTED => {
            SqlError::Abort(AbortReason::Deadlock, message)
        }
        Some(code) if *code == SqlState::LOCK_NOT_AVAILABLE => {
            SqlError::Abort(AbortReason::LockConflict, message)
        }
        _ => SqlError::Failed(message),
    }
}

impl PostgresSession {
    fn statement(&mut self, sql: &str) -> Result<Statement, SqlError> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql).map_err(classify)?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

fn params(values: &[SqlValue]) -> Vec<&(dyn ToSql + Sync)> {
    values.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

impl Session for PostgresSession {
    fn batch(&mut self, sql: &str) -> Result<(), SqlError> {
        self.client.batch_execute(sql).map_err(classify)
    }

    fn execute(&mut self, sql: &str, values: &[SqlValue]) -> Result<u64, SqlError> {
        let statement = self.statement(sql)?;
        self.client
            .execute(&statement, &params(values))
            .map_err(classify)
    }

    fn query(&mut self, sql: &str, values: &[SqlValue]) -> Result<Vec<SqlRow>, SqlError> {
        let statement = self.statement(sql)?;
        let rows = self
            .client
            .query(&statement, &params(values))
            .map_err(classify)?;
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| {
                        row.try_get::<_, PgCell>(i)
                            .map(|cell| cell.0)
                            .map_err(|e| SqlError::Failed(format!("column {i} of {sql}: {e}")))
                    })
                    .collect()
            })
            .collect()
    }

    fn begin(&mut self, mode: TxnMode) -> Result<(), SqlError> {
        let sql = match mode {
            TxnMode::ReadWrite(Isolation::Snapshot) => "BEGIN ISOLATION LEVEL REPEATABLE READ",
            TxnMode::ReadWrite(Isolation::Serializable) => "BEGIN ISOLATION LEVEL SERIALIZABLE",
            TxnMode::ReadOnly(Isolation::Snapshot) => {
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
            }
            TxnMode::ReadOnly(Isolation::Serializable) => {
                "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY"
            }
        };
        self.client.batch_execute(sql).map_err(classify)
    }

    fn commit(&mut self) -> Result<(), SqlError> {
        // A failed COMMIT ends the transaction block all the same.
        self.client.batch_execute("COMMIT").map_err(classify)
    }

    fn rollback(&mut self) -> Result<(), SqlError> {
        self.client.batch_execute("ROLLBACK").map_err(classify)
    }
}

impl ToSql for SqlValue {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            SqlValue::Null => Ok(IsNull::Yes),
            SqlValue::Int(i) if *ty == Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
            SqlValue::Int(i) if *ty == Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
            SqlValue::Int(i) if *ty == Type::FLOAT8 => (*i as f64).to_sql(ty, out),
            SqlValue::Int(i) => i.to_sql(ty, out),
            SqlValue::Float(f) => f.to_sql(ty, out),
            SqlValue::Text(text) => text.as_str().to_sql(ty, out),
            SqlValue::Bytes(bytes) => bytes.as_slice().to_sql(ty, out),
        }
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// A result cell of any type the workloads read.
struct PgCell(SqlValue);

impl<'a> FromSql<'a> for PgCell {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let value = match *ty {
            Type::INT8 => SqlValue::Int(i64::from_sql(ty, raw)?),
            Type::INT4 => SqlValue::Int(i64::from(i32::from_sql(ty, raw)?)),
            Type::INT2 => SqlValue::Int(i64::from(i16::from_sql(ty, raw)?)),
            Type::FLOAT8 => SqlValue::Float(f64::from_sql(ty, raw)?),
            Type::FLOAT4 => SqlValue::Float(f64::from(f32::from_sql(ty, raw)?)),
            Type::BOOL => SqlValue::Int(i64::from(bool::from_sql(ty, raw)?)),
            Type::NUMERIC => numeric(raw)?,
            Type::BYTEA => SqlValue::Bytes(Vec::<u8>::from_sql(ty, raw)?),
            _ => SqlValue::Text(String::from_sql(ty, raw)?),
        };
        Ok(PgCell(value))
    }

    fn from_sql_null(_ty: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(PgCell(SqlValue::Null))
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }
}

/// A NUMERIC in PostgreSQL's binary form (digit count, weight, sign, display scale, then
/// base-10,000 digits): an integer if it has no fraction and fits, else the nearest f64.
fn numeric(raw: &[u8]) -> Result<SqlValue, Box<dyn std::error::Error + Sync + Send>> {
    let word = |i: usize| -> Result<u16, Box<dyn std::error::Error + Sync + Send>> {
        raw.get(i..i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "a NUMERIC value too short".into())
    };
    let digits = usize::from(word(0)?);
    let weight = i32::from(word(2)? as i16);
    let sign = word(4)?;
    let scale = word(6)?;
    if sign == 0xC000 {
        return Ok(SqlValue::Float(f64::NAN));
    }
    let negative = sign == 0x4000;
    let mut integer: Option<i64> = (scale == 0).then_some(0);
    let mut float = 0.0f64;
    for i in 0..digits {
        let digit = i64::from(word(8 + 2 * i)?);
        let exponent = weight - i as i32;
        float += digit as f64 * 10_000f64.powi(exponent);
        integer = integer.and_then(|sum| {
            if exponent < 0 {
                (digit == 0).then_some(sum)
            } else {
                10_000i64
                    .checked_pow(exponent as u32)
                    .and_then(|p| p.checked_mul(digit))
                    .and_then(|v| sum.checked_add(v))
            }
        });
    }
    Ok(match integer {
        Some(i) => SqlValue::Int(if negative { -i } else { i }),
        None => SqlValue::Float(if negative { -float } else { float }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(digits: &[u16], weight: i16, negative: bool, scale: u16) -> Vec<u8> {
        let mut raw = Vec::new();
        raw.extend((digits.len() as u16).to_be_bytes());
        raw.extend(weight.to_be_bytes());
        raw.extend(if negative { 0x4000u16 } else { 0 }.to_be_bytes());
        raw.extend(scale.to_be_bytes());
        for d in digits {
            raw.extend(d.to_be_bytes());
        }
        raw
    }

    #[test]
    fn numerics_decode_to_integers_or_floats() {
        // 123456789 = 1 | 2345 | 6789, weight 2.
        assert_eq!(
            numeric(&encode(&[1, 2345, 6789], 2, false, 0)).unwrap(),
            SqlValue::Int(123_456_789)
        );
        assert_eq!(
            numeric(&encode(&[42], 0, true, 0)).unwrap(),
            SqlValue::Int(-42)
        );
        // 12.5 = 12 | 5000, weight 0, scale 1.
        assert_eq!(
            numeric(&encode(&[12, 5000], 0, false, 1)).unwrap(),
            SqlValue::Float(12.5)
        );
        assert_eq!(
            numeric(&encode(&[], 0, false, 0)).unwrap(),
            SqlValue::Int(0)
        );
    }

    #[test]
    fn copy_text_escapes_what_copy_reads_specially() {
        let mut out = String::new();
        for value in [
            SqlValue::Text("a\tb\\c\nd".into()),
            SqlValue::Null,
            SqlValue::Float(0.1),
            SqlValue::Bytes(vec![0, 255]),
        ] {
            copy_text(&mut out, &value);
            out.push('|');
        }
        assert_eq!(out, "a\\tb\\\\c\\nd|\\N|0.1|\\\\x00ff|");
    }
}
