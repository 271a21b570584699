//! The engine, generic over the seams: version storage `V` and collector `G`. The public
//! [`Database`](crate::Database) picks one monomorphized engine at `open`, so the hot path
//! has no dynamic dispatch.

pub(crate) mod collect;
pub(crate) mod load;
pub(crate) mod txn;
pub(crate) mod vacuum;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::sync::Arc;

use parking_lot::Mutex;

use crate::cc::Protocol;
use crate::error::{Error, Result};
use crate::gc::Collector;
use crate::index::ordered::{OrderedIndex, PrimaryIndex};
use crate::schema::{Schema, TableSchema};
use crate::stats::Stats;
use crate::txn::slots::TxnManager;
use crate::version::{ChainEdit, VersionStorage};
use crate::TableId;

/// The most tables one database may hold.
pub(crate) const MAX_TABLES: usize = 4096;

/// A row as the indexes and write sets hold it.
pub(crate) type RowRef<V> = Arc<<V as VersionStorage>::Row>;

/// A row a transaction wrote, kept for stamping, rollback and finalizing.
pub(crate) struct WrittenRow<V: VersionStorage> {
    pub(crate) table: u32,
    pub(crate) row: RowRef<V>,
}

/// What a secondary-index entry points at: the row, and under physical pointers (Wu et
/// al. §6.2) the exact version whose values gave the entry its key.
pub(crate) struct IndexTarget<V: VersionStorage> {
    pub(crate) row: RowRef<V>,
    /// `Some` exactly under physical pointers.
    pub(crate) exact: Option<V::Exact>,
}

impl<V: VersionStorage> Clone for IndexTarget<V> {
    fn clone(&self) -> Self {
        IndexTarget {
            row: Arc::clone(&self.row),
            exact: self.exact.clone(),
        }
    }
}

/// One table: its schema and its indexes.
pub(crate) struct Table<V: VersionStorage> {
    pub(crate) schema: TableSchema,
    pub(crate) primary: PrimaryIndex<RowRef<V>>,
    /// Logical pointers: one entry per distinct key among a row's versions, keyed by the
    /// indexed columns and the primary key. Physical pointers: one entry per version in
    /// which the row exists, keyed by the same and then the version's tag
    /// ([`VersionStorage::exact_tag`]), so that each version's entries are its own.
    pub(crate) secondary: Vec<OrderedIndex<IndexTarget<V>>>,
    /// Whether secondary entries are physical pointers (`crate::IndexPointers`).
    pub(crate) physical_pointers: bool,
    /// How the table's rows store long values.
    pub(crate) non_inline: crate::NonInline,
    /// The rows in blocks, for the tuple-level collectors ('vac', 'coop'); `None` under
    /// the others.
    pub(crate) tuple_gc: Option<vacuum::TupleGc<RowRef<V>>>,
}

/// The engine.
pub(crate) struct Engine<V: VersionStorage, G: Collector> {
    pub(crate) txns: TxnManager<WrittenRow<V>>,
    tables: Box<[OnceLock<Table<V>>]>,
    table_count: AtomicUsize,
    table_names: Mutex<HashMap<String, u32>>,
    /// Distinguishes this database's table ids from another's.
    pub(crate) tag: u32,
    /// The concurrency-control protocol's shared state.
    pub(crate) protocol: Protocol,
    /// The garbage collector's shared state.
    pub(crate) gc: G,
    /// Held by a background collector's round while it has committed transactions taken
    /// out of the queues, and by `collect_all`, which must see every one of them.
    pub(crate) collection_round: Mutex<()>,
    /// How finalizing removes obsolete versions (`crate::VersionRemoval`).
    pub(crate) version_removal: crate::VersionRemoval,
    /// What secondary-index entries point at.
    pub(crate) index_pointers: crate::IndexPointers,
    /// How rows store long values (`crate::NonInline`).
    pub(crate) non_inline: crate::NonInline,
    /// How many memory spaces the version storage allocates from (`None`: the process's
    /// allocator; `crate::memory_spaces`).
    pub(crate) memory_spaces: Option<usize>,
    /// Rounds the background collector thread ran (the tuple-level collectors count
    /// their complete passes by it).
    pub(crate) background_rounds: std::sync::atomic::AtomicU64,
    /// The redo log of a persistent database, set once recovery is done (recovery's own
    /// transactions are not logged). Empty in memory: the commit path then does nothing
    /// more than test it.
    pub(crate) log: OnceLock<std::sync::Arc<crate::durability::log::Log>>,
    /// What the version storage keeps beside its rows (`()` for the heap storages).
    pub(crate) storage: V::Shared,
}

/// Bytes of the version tag that ends every secondary entry under physical pointers.
const EXACT_TAG_BYTES: usize = std::mem::size_of::<u64>();

impl<V: VersionStorage> Table<V> {
    /// Encodes the entry of `values` in secondary index `index`: the indexed columns and
    /// the primary key, then, under physical pointers, the `tag` of the version the values
    /// are ([`VersionStorage::exact_tag`]; `None` exactly under logical pointers).
    pub(crate) fn encode_entry<C: crate::row::Columns + ?Sized>(
        &self,
        out: &mut Vec<u8>,
        values: &C,
        index: usize,
        tag: Option<u64>,
    ) {
        debug_assert_eq!(tag.is_some(), self.physical_pointers);
        crate::key::encode_index_entry(
            out,
            values,
            &self.schema.indexes[index].columns,
            &self.schema.primary_key,
        );
        if let Some(tag) = tag {
            out.extend_from_slice(&tag.to_be_bytes());
        }
    }

    /// A secondary entry as validation compares it: the indexed columns and the primary
    /// key, without the version tag physical pointers append. Commit records hold entries
    /// without tags (`WrittenKey::entries`), so a bound a scan records must be one too: a
    /// tagged bound sorts just above the untagged entry of its own row, and a descending
    /// scan that stopped on a row left that row out of what it read
    /// (`regression_a_descending_index_scan_that_stops_early_is_validated`).
    pub(crate) fn untagged_entry<'a>(&self, entry: &'a [u8]) -> &'a [u8] {
        if self.physical_pointers {
            debug_assert!(
                entry.len() > EXACT_TAG_BYTES,
                "a physical entry ends in a tag"
            );
            &entry[..entry.len() - EXACT_TAG_BYTES]
        } else {
            entry
        }
    }
}

impl<V: VersionStorage, G: Collector> Engine<V, G> {
    /// The engine of a database opened with `options` (validated), its collector's state
    /// `gc` and its storage's `storage`.
    pub(crate) fn new(tag: u32, options: &crate::Options, gc: G, storage: V::Shared) -> Self {
        let index_pointers = options.index_pointers;
        // `Options::validate` refuses the combination; this is its backstop.
        assert!(
            !G::COOPERATIVE || V::COOPERATIVE_CLEANING,
            "{} needs a storage whose walks begin at the oldest version, not {}",
            G::NAME,
            V::NAME
        );
        assert!(
            index_pointers == crate::IndexPointers::Logical || V::PHYSICAL_POINTERS,
            "{} has no physical pointers",
            V::NAME
        );
        // The anchor the timed work's ticks are converted from, long before a conversion.
        crate::ticks::start();
        Engine {
            txns: TxnManager::new(),
            tables: (0..MAX_TABLES).map(|_| OnceLock::new()).collect(),
            table_count: AtomicUsize::new(0),
            table_names: Mutex::new(HashMap::new()),
            tag,
            protocol: Protocol::new(options.concurrency_control),
            gc,
            collection_round: Mutex::new(()),
            version_removal: options.version_removal,
            index_pointers,
            non_inline: options.non_inline,
            memory_spaces: options.memory_spaces,
            background_rounds: std::sync::atomic::AtomicU64::new(0),
            log: OnceLock::new(),
            storage,
        }
    }

    pub(crate) fn design(&self) -> String {
        let mut design = format!("{}/{}/{}", V::NAME, G::NAME, self.protocol.name());
        if self.index_pointers == crate::IndexPointers::Physical {
            design += "/physical";
        }
        if self.non_inline != crate::NonInline::Packed {
            design += "/non-inline-";
            design += self.non_inline.name();
        }
        if let Some(spaces) = self.memory_spaces {
            design += &format!("/spaces-{spaces}");
        }
        design
    }

    /// While the returned guard lives, the version storage's allocations on this thread
    /// come from the thread's memory space, if the database has spaces (Wu et al. §4.4).
    pub(crate) fn allocate_in_memory_space(&self) -> crate::memory_spaces::SpaceGuard {
        crate::memory_spaces::allocate_in(
            self.memory_spaces
                .map(crate::memory_spaces::space_of_this_thread),
        )
    }

    pub(crate) fn create_table(&self, name: &str, schema: Schema) -> Result<TableId> {
        self.create_table_as(name, schema, true)
    }

    /// Creates a table the storage's own catalog lists already (its recovery): the same,
    /// without recording it there again.
    pub(crate) fn create_recovered_table(&self, name: &str, schema: Schema) -> Result<TableId> {
        self.create_table_as(name, schema, false)
    }

    fn create_table_as(&self, name: &str, schema: Schema, record: bool) -> Result<TableId> {
        let schema = schema.validate(name)?;
        // Creating a table is rare and not on any transaction's path: a mutex is fine.
        let mut names = self.table_names.lock();
        if names.contains_key(name) {
            return Err(Error::DuplicateTable {
                name: name.to_owned(),
            });
        }
        let index = self.table_count.load(Ordering::Acquire);
        if index >= MAX_TABLES {
            return Err(Error::CapacityExceeded {
                what: "tables".into(),
                limit: MAX_TABLES,
            });
        }
        if record {
            // Durable in the storage's catalog before anyone can write into it (a storage
            // that keeps its own data; nothing for the others).
            V::record_table(&self.storage, index as u32, &schema)?;
        }
        let secondary = schema.indexes.iter().map(|_| OrderedIndex::new()).collect();
        let primary = PrimaryIndex::new(schema.primary_key_index);
        let table = Table {
            schema,
            primary,
            secondary,
            physical_pointers: self.index_pointers == crate::IndexPointers::Physical,
            non_inline: self.non_inline,
            tuple_gc: (G::FINALIZING == crate::gc::Finalizing::TupleLevel)
                .then(vacuum::TupleGc::new),
        };
        if self.tables[index].set(table).is_err() {
            unreachable!("table slots are filled in order under the names mutex");
        }
        self.table_count.store(index + 1, Ordering::Release);
        names.insert(name.to_owned(), index as u32);
        Ok(TableId {
            index: index as u32,
            database: self.tag,
        })
    }

    pub(crate) fn table_id(&self, name: &str) -> Result<TableId> {
        self.table_names
            .lock()
            .get(name)
            .map(|&index| TableId {
                index,
                database: self.tag,
            })
            .ok_or_else(|| Error::UnknownTable {
                name: name.to_owned(),
            })
    }

    /// The table behind an id, if it belongs to this database.
    pub(crate) fn table(&self, id: TableId) -> Result<&Table<V>> {
        if id.database != self.tag {
            return Err(Error::UnknownTable {
                name: format!("{id:?} (an id from another database)"),
            });
        }
        self.table_by_index(id.index)
            .ok_or_else(|| Error::UnknownTable {
                name: format!("{id:?}"),
            })
    }

    pub(crate) fn table_by_index(&self, index: u32) -> Option<&Table<V>> {
        self.tables.get(index as usize).and_then(OnceLock::get)
    }

    /// Every table created so far.
    pub(crate) fn tables(&self) -> impl Iterator<Item = &Table<V>> {
        let count = self.table_count.load(Ordering::Acquire);
        self.tables[..count].iter().filter_map(OnceLock::get)
    }

    /// How many tables exist (table indexes are `0..count`).
    pub(crate) fn table_count(&self) -> usize {
        self.table_count.load(Ordering::Acquire)
    }

    /// Every table's index and schema, in creation order.
    pub(crate) fn catalog(&self) -> Vec<(u32, TableSchema)> {
        (0..self.table_count() as u32)
            .filter_map(|index| {
                self.table_by_index(index)
                    .map(|table| (index, table.schema.clone()))
            })
            .collect()
    }

    pub(crate) fn table_names(&self) -> Vec<String> {
        let names = self.table_names.lock();
        let mut sorted: Vec<(u32, String)> =
            names.iter().map(|(name, &i)| (i, name.clone())).collect();
        sorted.sort();
        sorted.into_iter().map(|(_, name)| name).collect()
    }

    pub(crate) fn stats(&self, new_window: bool) -> Stats {
        let mut stats = Stats {
            persistent_memory: V::persistent_memory_stats(&self.storage),
            ..Stats::default()
        };
        // One rate for every slot, so that sums and comparisons of timed work hold in
        // nanoseconds as they did in ticks.
        let rate = crate::ticks::Rate::measure();
        for slot in self.txns.slots() {
            slot.stats.add_to(&mut stats, rate, new_window);
        }
        let (versions, bytes) = V::reclaimed_outside_chains(&self.storage);
        stats.versions_reclaimed += versions;
        stats.version_bytes_freed += bytes;
        stats
    }

    /// Number of version records behind the newest state of the row with this key.
    pub(crate) fn chain_length(&self, id: TableId, key: &[crate::Value]) -> Result<Option<usize>> {
        let table = self.table(id)?;
        table.schema.check_key(key)?;
        let mut encoded = Vec::new();
        crate::key::encode_key_values(&mut encoded, key);
        Ok(table
            .primary
            .with(&encoded, |row| V::edit(row, |chain| chain.chain_len())))
    }

    /// Number of rows in the primary index of a table, including deleted rows that some
    /// snapshot may still see.
    pub(crate) fn index_entries(&self, id: TableId) -> Result<usize> {
        Ok(self.table(id)?.primary.len())
    }

    /// Number of entries in the secondary index `name` of a table.
    pub(crate) fn secondary_index_entries(&self, id: TableId, name: &str) -> Result<usize> {
        let table = self.table(id)?;
        let index = table.schema.index_position(name)?;
        Ok(table.secondary[index].len())
    }
}

impl<V: VersionStorage, G: Collector> Drop for Engine<V, G> {
    fn drop(&mut self) {
        // Slots may outlive the engine in thread-local handles; drop the rows they hold.
        for slot in self.txns.slots() {
            slot.committed.lock().clear();
            slot.assigned.lock().clear();
            slot.recycle.lock().0.clear();
        }
    }
}
