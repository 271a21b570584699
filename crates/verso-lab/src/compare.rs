//! `--compare AXIS=A,B,...`: which axis of the design space a run compares, and the values.
//!
//! One axis per run; every other axis keeps the value its own option gives (or its
//! default). The axes are the engine's (collector, version storage, protocol, index
//! pointers, out-of-line values, the disk engine's eviction, placement and version
//! organization), whole engine designs (the in-memory engine beside the disk engine's
//! designs: [`Design`]) and the system (Verso beside the peers). A bare list
//! (`--compare steam,watermark`) compares collectors, as before axes existed.

use verso::disk::ReplacementPolicy;
use verso::research::NonInline;
use verso::{
    ConcurrencyControl, GarbageCollector, IndexPointers, VersionPlacement, VersionStorageKind,
};

use crate::peers::PeerKind;

/// The system axis's name for Verso itself (beside the peers' names).
pub const VERSO: &str = "verso";

/// What `--compare` compares: one axis and its values, in the order given (the runs'
/// order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compared {
    /// `gc=` (or a bare list): garbage collectors.
    Collectors(Vec<GarbageCollector>),
    /// `storage=`: version storages.
    Storages(Vec<VersionStorageKind>),
    /// `protocol=`: concurrency-control protocols.
    Protocols(Vec<ConcurrencyControl>),
    /// `index-pointers=`: what secondary-index entries point at.
    IndexPointers(Vec<IndexPointers>),
    /// `non-inline=`: how long values are stored.
    NonInline(Vec<NonInline>),
    /// `eviction=`: the disk engine's buffer-pool eviction policies.
    Evictions(Vec<ReplacementPolicy>),
    /// `placement=`: where the disk engine's heap puts new versions.
    Placements(Vec<VersionPlacement>),
    /// `disk-storage=`: the disk engine's version organization (PostgreSQL's heap,
    /// InnoDB's undo).
    DiskStorages(Vec<verso::disk::DiskStorage>),
    /// `design=`: whole engine designs, each setting the engine (in memory or on disk),
    /// the disk engine's version organization and the collector at once.
    Designs(Vec<Design>),
    /// `system=`: Verso (`verso`, with the run's own options) and peers, run on the same
    /// data and seed (`None` is Verso).
    Systems(Vec<Option<PeerKind>>),
}

/// The axes by name, as `--compare` takes them.
pub const AXES: [&str; 10] = [
    "gc",
    "storage",
    "protocol",
    "index-pointers",
    "non-inline",
    "eviction",
    "placement",
    "disk-storage",
    "design",
    "system",
];

/// A whole engine design, as `--compare design=` names it: the in-memory engine, or the
/// disk engine with one version organization and one collector. The disk designs' names
/// are the labels a `--disk` run takes from its options ([`disk_label`]): one invocation
/// with `--compare design=...` labels its runs as the separate invocations would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Design {
    /// `memory`: the in-memory engine, under Steam (the default collector), with the run's
    /// in-memory design options (`--storage`, `--protocol`, ...).
    Memory,
    /// `disk-heap`: the disk engine, PostgreSQL's heap, pruned by PostgreSQL's rule alone
    /// (the horizon; `--gc vac`).
    DiskHeap,
    /// `disk-heap-eager`: the disk engine, PostgreSQL's heap, with Steam's eager pruning
    /// on pages (`--gc steam`).
    DiskHeapEager,
    /// `disk-undo`: the disk engine, InnoDB's clustered tree and undo, InnoDB's purge
    /// alone (`--gc vac`).
    DiskUndo,
    /// `disk-undo-eager`: the disk engine, InnoDB's clustered tree and undo, purge and
    /// Steam's eager pruning of undo chains (`--gc steam`).
    DiskUndoEager,
}

impl Design {
    /// Every design, in the order the lab lists them.
    pub const ALL: [Design; 5] = [
        Design::Memory,
        Design::DiskHeap,
        Design::DiskHeapEager,
        Design::DiskUndo,
        Design::DiskUndoEager,
    ];

    /// Its name on the command line, which is also its runs' label.
    pub fn name(self) -> &'static str {
        match self {
            Design::Memory => "memory",
            Design::DiskHeap => "disk-heap",
            Design::DiskHeapEager => "disk-heap-eager",
            Design::DiskUndo => "disk-undo",
            Design::DiskUndoEager => "disk-undo-eager",
        }
    }

    /// The design named `name`; an unknown name is refused, listing the designs.
    pub fn from_name(name: &str) -> Result<Design, String> {
        Design::ALL
            .into_iter()
            .find(|design| design.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown design {name:?} ({})",
                    Design::ALL.map(Design::name).join(", ")
                )
            })
    }

    /// The collector it runs: Steam for `memory` and the eager designs, PostgreSQL's
    /// vacuum rule (the horizon alone; in InnoDB's design, purge alone) for the others.
    pub fn garbage_collector(self) -> GarbageCollector {
        match self {
            Design::Memory | Design::DiskHeapEager | Design::DiskUndoEager => {
                GarbageCollector::Steam
            }
            Design::DiskHeap | Design::DiskUndo => GarbageCollector::Vacuum,
        }
    }

    /// The disk engine's version organization it runs; `None` for `memory`, which runs in
    /// memory.
    pub fn disk_storage(self) -> Option<verso::disk::DiskStorage> {
        match self {
            Design::Memory => None,
            Design::DiskHeap | Design::DiskHeapEager => Some(verso::disk::DiskStorage::Heap),
            Design::DiskUndo | Design::DiskUndoEager => Some(verso::disk::DiskStorage::Undo),
        }
    }
}

/// The label of a run on the disk engine, from its version organization and collector:
/// `disk-heap` or `disk-undo` under PostgreSQL's rule alone (`--gc vac`), else
/// `disk-heap-eager` or `disk-undo-eager` (Steam's eager pruning). The disk designs are
/// named by it ([`Design`]).
pub fn disk_label(storage: verso::disk::DiskStorage, collector: GarbageCollector) -> String {
    let storage = storage.name();
    match collector {
        GarbageCollector::Vacuum => format!("disk-{storage}"),
        _ => format!("disk-{storage}-eager"),
    }
}

impl Compared {
    /// The axis's name on the command line (`storage`, ...), which is also the option that
    /// sets it for every configuration (`--storage`), except `system` (`--peer`) and
    /// `design` (`--gc`, `--disk-storage` and `--disk` together).
    pub fn axis(&self) -> &'static str {
        match self {
            Compared::Collectors(_) => "gc",
            Compared::Storages(_) => "storage",
            Compared::Protocols(_) => "protocol",
            Compared::IndexPointers(_) => "index-pointers",
            Compared::NonInline(_) => "non-inline",
            Compared::Evictions(_) => "eviction",
            Compared::Placements(_) => "placement",
            Compared::DiskStorages(_) => "disk-storage",
            Compared::Designs(_) => "design",
            Compared::Systems(_) => "system",
        }
    }

    /// The values' names, in order: the configurations' labels.
    pub fn labels(&self) -> Vec<&'static str> {
        match self {
            Compared::Collectors(v) => v.iter().map(|x| x.name()).collect(),
            Compared::Storages(v) => v.iter().map(|x| x.name()).collect(),
            Compared::Protocols(v) => v.iter().map(|x| x.short_name()).collect(),
            Compared::IndexPointers(v) => v.iter().map(|x| x.name()).collect(),
            Compared::NonInline(v) => v.iter().map(|x| x.name()).collect(),
            Compared::Evictions(v) => v.iter().map(|x| x.name()).collect(),
            Compared::Placements(v) => v.iter().map(|x| x.name()).collect(),
            Compared::DiskStorages(v) => v.iter().map(|x| x.name()).collect(),
            Compared::Designs(v) => v.iter().map(|x| x.name()).collect(),
            Compared::Systems(v) => v.iter().map(|x| x.map_or(VERSO, PeerKind::name)).collect(),
        }
    }
}

/// Parses `--compare`'s value: `AXIS=A,B,...` or `A,B,...` (collectors). Refuses an unknown
/// axis or value (naming what there is), an empty value, and fewer than two values.
pub fn parse(text: &str) -> Result<Compared, String> {
    let (axis, values) = match text.split_once('=') {
        Some((axis, values)) => (axis.trim(), values),
        None => ("gc", text),
    };
    let values: Vec<&str> = values.split(',').map(str::trim).collect();
    if values.iter().any(|v| v.is_empty()) {
        return Err(format!(
            "{text:?}: an empty value; give AXIS=A,B,... (axes: {})",
            AXES.join(", ")
        ));
    }
    fn each<T>(
        values: &[&str],
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        values.iter().map(|v| parse(v)).collect()
    }
    let compared = match axis {
        "gc" => Compared::Collectors(each(&values, |v| {
            GarbageCollector::from_name(v).map_err(|e| e.to_string())
        })?),
        "storage" => Compared::Storages(each(&values, |v| {
            VersionStorageKind::from_name(v).map_err(|e| e.to_string())
        })?),
        "protocol" => Compared::Protocols(each(&values, |v| {
            ConcurrencyControl::from_name(v).map_err(|e| e.to_string())
        })?),
        "index-pointers" => Compared::IndexPointers(each(&values, |v| {
            IndexPointers::from_name(v).map_err(|e| e.to_string())
        })?),
        "non-inline" => Compared::NonInline(each(&values, |v| {
            NonInline::from_name(v).map_err(|e| e.to_string())
        })?),
        "eviction" => Compared::Evictions(each(&values, ReplacementPolicy::from_name)?),
        "placement" => Compared::Placements(each(&values, |v| {
            VersionPlacement::from_name(v)
                .ok_or_else(|| format!("unknown version placement {v:?} (postgres, co-located)"))
        })?),
        "disk-storage" => Compared::DiskStorages(each(&values, |v| {
            verso::disk::DiskStorage::from_name(v)
                .ok_or_else(|| format!("unknown disk storage {v:?} (heap, undo)"))
        })?),
        "design" => Compared::Designs(each(&values, Design::from_name)?),
        "system" => Compared::Systems(each(&values, |v| match v {
            VERSO => Ok(None),
            peer => PeerKind::from_name(peer)
                .map(Some)
                .map_err(|e| format!("{e} (or {VERSO})")),
        })?),
        other => {
            return Err(format!(
                "{other:?} is not an axis to compare; the axes: {} (e.g. \
                 --compare storage=delta,append-n2o)",
                AXES.join(", ")
            ))
        }
    };
    if values.len() < 2 {
        return Err(format!(
            "{text:?}: name at least two values to compare (e.g. {axis}={},...)",
            values[0]
        ));
    }
    Ok(compared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_axis_parses_and_a_bare_list_is_collectors() {
        assert_eq!(
            parse("steam,watermark"),
            Ok(Compared::Collectors(vec![
                GarbageCollector::Steam,
                GarbageCollector::WatermarkOnly
            ]))
        );
        for (text, axis, labels) in [
            ("gc=steam,hana", "gc", vec!["steam", "hana"]),
            (
                "storage=delta,append-n2o",
                "storage",
                vec!["delta", "append-n2o"],
            ),
            (
                "protocol=si,mvocc,ssn",
                "protocol",
                vec!["si", "mvocc", "ssn"],
            ),
            (
                "index-pointers=logical,physical",
                "index-pointers",
                vec!["logical", "physical"],
            ),
            (
                "non-inline=packed,shared",
                "non-inline",
                vec!["packed", "shared"],
            ),
            ("eviction=lru2,clock", "eviction", vec!["lru2", "clock"]),
            (
                "placement=postgres,co-located",
                "placement",
                vec!["postgres", "co-located"],
            ),
            (
                "disk-storage=heap,undo",
                "disk-storage",
                vec!["heap", "undo"],
            ),
            (
                "design=memory,disk-heap,disk-heap-eager,disk-undo,disk-undo-eager",
                "design",
                vec![
                    "memory",
                    "disk-heap",
                    "disk-heap-eager",
                    "disk-undo",
                    "disk-undo-eager",
                ],
            ),
            (
                "system=verso,postgres,sqlite",
                "system",
                vec!["verso", "postgres", "sqlite"],
            ),
        ] {
            let compared = parse(text).unwrap();
            assert_eq!(
                (compared.axis(), compared.labels()),
                (axis, labels),
                "{text}"
            );
        }
    }

    #[test]
    fn bad_axes_and_values_are_refused_naming_what_there_is() {
        let refused = |text: &str, says: &str| {
            let error = parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        };
        refused("colour=red,blue", "the axes: gc, storage, protocol");
        refused("storage=delta,btree", "btree");
        refused("protocol=si,2pl", "2pl");
        refused("system=verso,oracle", "oracle");
        refused("storage=delta", "at least two");
        refused("storage=delta,,time-travel", "empty value");
        refused("steam", "at least two");
        refused(
            "design=memory,disk-innodb",
            "unknown design \"disk-innodb\" (memory, disk-heap, disk-heap-eager, disk-undo, \
             disk-undo-eager)",
        );
        refused("design=disk-undo", "at least two");
    }

    /// Each design sets the engine, the disk storage and the collector, and each disk
    /// design is named as a `--disk` run with its storage and collector is labelled.
    #[test]
    fn each_design_sets_engine_storage_and_collector_and_is_named_as_disk_runs_are() {
        use verso::disk::DiskStorage;
        let expected = [
            (Design::Memory, None, GarbageCollector::Steam),
            (
                Design::DiskHeap,
                Some(DiskStorage::Heap),
                GarbageCollector::Vacuum,
            ),
            (
                Design::DiskHeapEager,
                Some(DiskStorage::Heap),
                GarbageCollector::Steam,
            ),
            (
                Design::DiskUndo,
                Some(DiskStorage::Undo),
                GarbageCollector::Vacuum,
            ),
            (
                Design::DiskUndoEager,
                Some(DiskStorage::Undo),
                GarbageCollector::Steam,
            ),
        ];
        assert_eq!(Design::ALL.len(), expected.len());
        for (design, storage, collector) in expected {
            assert_eq!(Design::from_name(design.name()), Ok(design));
            assert_eq!(design.disk_storage(), storage, "{}", design.name());
            assert_eq!(design.garbage_collector(), collector, "{}", design.name());
            if let Some(storage) = storage {
                assert_eq!(disk_label(storage, collector), design.name());
            }
        }
    }
}
