//! The emulated persistent-memory region (`verso::pmem`): the exact counters of the lines a
//! persist point writes, stores at any offset, the simulated device's crash model, and the
//! memory-mapped backends.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use verso::pmem::{
    emulated_line_delay, measure_dram_write_bandwidth, AtomicUnit, LineSize, MmapRegion, Purpose,
    Region, RegionBackend, RegionKind, SimulatedRegion,
};
use verso::Error;

const LEN: usize = 4096;

fn simulated(seed: u64) -> (SimulatedRegion, Arc<Region>) {
    let device = SimulatedRegion::new(LEN, seed);
    let region = Region::new(device.map().unwrap(), LineSize::B256).unwrap();
    (device, region)
}

#[test]
fn a_store_dirties_exactly_the_lines_it_touches_at_every_line_size() {
    // 10 bytes at 250: bytes 250..260. At 256-byte lines that is lines 0 and 1; at 128,
    // lines 1 and 2; at 64, lines 3 and 4. 8 bytes at 256: one line at every size.
    for (line, expected_first) in [(LineSize::B256, 2), (LineSize::B128, 2), (LineSize::B64, 2)] {
        let device = SimulatedRegion::new(LEN, 1);
        let region = Region::new(device.map().unwrap(), line).unwrap();
        let mut writer = region.writer();
        writer.store(250, &[7; 10], Purpose::Content);
        assert_eq!(writer.dirty_lines(), expected_first);
        let report = writer.persist().unwrap();
        assert_eq!(report.lines, expected_first as u64);
        writer.store(256, &[1; 8], Purpose::Content);
        assert_eq!(writer.persist().unwrap().lines, 1);
        let stats = region.stats();
        assert_eq!(stats.line_bytes, line.bytes());
        assert_eq!(stats.purpose(Purpose::Content).logical_bytes, 18);
        assert_eq!(stats.lines_persisted(), expected_first as u64 + 1);
        assert_eq!(
            stats.media_bytes_written(),
            (expected_first as u64 + 1) * u64::from(line.bytes())
        );
        assert_eq!(stats.persist_points, 2);
    }
}

#[test]
fn a_line_stored_twice_before_a_persist_point_counts_once_and_again_after_it() {
    let (_device, region) = simulated(2);
    let mut writer = region.writer();
    writer.store(0, &[1; 16], Purpose::Content);
    writer.store_u64(64, 5, Purpose::BlockMetadata);
    writer.store(200, &[2; 8], Purpose::Content);
    writer.fetch_or_u64(8, 1 << 3, Purpose::BlockMetadata);
    assert_eq!(writer.persist().unwrap().lines, 1);
    writer.fetch_max_u64(240, 9, Purpose::BlockMetadata);
    assert_eq!(writer.persist().unwrap().lines, 1);
    // Nothing dirty: a persist point that does nothing and counts nothing.
    assert_eq!(writer.persist().unwrap().lines, 0);
    let stats = region.stats();
    assert_eq!(stats.lines_persisted(), 2);
    assert_eq!(stats.persist_points, 2);
    assert_eq!(stats.logical_bytes_stored(), 16 + 8 + 8 + 8 + 8);
}

#[test]
fn a_line_dirtied_for_two_purposes_counts_for_the_first() {
    let (_device, region) = simulated(3);
    let mut writer = region.writer();
    // Line 1 for content, then line 0, then line 1 again for metadata: the repeat is not
    // adjacent, so only the sort and the deduplication can keep content's claim on line 1.
    writer.store(300, &[1; 24], Purpose::Content);
    writer.store_u64(0, 1, Purpose::BlockMetadata);
    writer.store_u64(256, 1, Purpose::BlockMetadata);
    writer.persist().unwrap();
    let stats = region.stats();
    assert_eq!(
        stats.purpose(Purpose::Content).lines_persisted,
        1,
        "line 1: content first"
    );
    assert_eq!(
        stats.purpose(Purpose::BlockMetadata).lines_persisted,
        1,
        "line 0"
    );
    assert_eq!(stats.purpose(Purpose::BlockMetadata).logical_bytes, 16);
}

#[test]
fn a_failed_compare_and_swap_or_an_empty_store_writes_and_counts_nothing() {
    let (_device, region) = simulated(33);
    let mut writer = region.writer();
    writer.store(512, &[], Purpose::Content);
    assert_eq!(
        writer.compare_exchange_u64(1024, 5, 6, Purpose::Directory),
        Err(0)
    );
    assert_eq!(writer.dirty_lines(), 0);
    assert_eq!(writer.persist().unwrap().lines, 0);
    assert_eq!(
        writer.compare_exchange_u64(1024, 0, 6, Purpose::Directory),
        Ok(0)
    );
    assert_eq!(writer.persist().unwrap().lines, 1);
    let stats = region.stats();
    assert_eq!(stats.logical_bytes_stored(), 8);
    assert_eq!(stats.persist_points, 1);
}

#[test]
fn a_dropped_writers_counts_stay_in_the_regions_totals() {
    let (_device, region) = simulated(34);
    for _ in 0..3 {
        let mut writer = region.writer();
        writer.store_u64(0, 1, Purpose::Content);
        writer.persist().unwrap();
    }
    let stats = region.stats();
    assert_eq!((stats.persist_points, stats.lines_persisted()), (3, 3));
}

#[test]
fn write_amplification_is_media_bytes_over_bytes_stored() {
    let (_device, region) = simulated(4);
    assert_eq!(region.stats().write_amplification(), None);
    let mut writer = region.writer();
    // One bit of a metadata word: 8 logical bytes, one 256-byte line: 32x.
    writer.fetch_or_u64(512, 1, Purpose::BlockMetadata);
    writer.persist().unwrap();
    assert_eq!(region.stats().write_amplification(), Some(32.0));
    // A whole line of content: 256 bytes for 256. Together: 512 / 264.
    writer.store(1024, &[3; 256], Purpose::Content);
    writer.persist().unwrap();
    assert_eq!(region.stats().write_amplification(), Some(512.0 / 264.0));
}

#[test]
fn stats_sum_every_writer_of_the_region_across_threads() {
    let (_device, region) = simulated(5);
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let region = &region;
            scope.spawn(move || {
                let mut writer = region.writer();
                for i in 0..100u64 {
                    // Each thread its own word of line `t`, and every thread line 15's word 0.
                    writer.store_u64(t * 256 + 8 * (i % 8), i, Purpose::Content);
                    writer.fetch_or_u64(15 * 256, 1 << t, Purpose::BlockMetadata);
                    writer.persist().unwrap();
                }
            });
        }
    });
    let stats = region.stats();
    // Each persist point: the thread's line and line 15, counted per writer.
    assert_eq!(stats.persist_points, 400);
    assert_eq!(stats.purpose(Purpose::Content).lines_persisted, 400);
    assert_eq!(stats.purpose(Purpose::BlockMetadata).lines_persisted, 400);
    assert_eq!(stats.logical_bytes_stored(), 400 * 16);
    assert_eq!(region.load_u64(15 * 256, Ordering::Acquire), 0b1111);
}

#[test]
fn concurrent_stores_into_one_word_keep_each_threads_bytes() {
    // Two threads store alternate bytes of the same words over and over: a partial-word
    // store must replace only its own bytes.
    let (_device, region) = simulated(6);
    std::thread::scope(|scope| {
        for t in 0..2u64 {
            let region = &region;
            scope.spawn(move || {
                let mut writer = region.writer();
                for round in 0..2_000u32 {
                    let value = (round % 251) as u8 + 1;
                    for byte in (t..64).step_by(2) {
                        writer.store(byte, &[value], Purpose::Content);
                    }
                }
                writer.persist().unwrap();
            });
        }
    });
    let mut bytes = [0u8; 64];
    region.read(0, &mut bytes);
    let last = (1_999 % 251) as u8 + 1;
    assert!(bytes.iter().all(|&b| b == last), "{bytes:?}");
}

#[test]
fn the_emulated_delay_spins_per_line_persisted_and_is_counted() {
    let device = SimulatedRegion::new(LEN, 7);
    let delay = Duration::from_micros(20);
    let region = Region::with_line_delay(device.map().unwrap(), LineSize::B256, delay).unwrap();
    let mut writer = region.writer();
    writer.store(0, &[1; 5 * 256], Purpose::Content);
    let report = writer.persist().unwrap();
    assert_eq!(report.lines, 5);
    assert!(report.line_delay_nanos >= 5 * 20_000, "{report:?}");
    assert_eq!(region.stats().line_delay_nanos, report.line_delay_nanos);
}

#[test]
fn bad_line_sizes_and_region_lengths_are_refused() {
    for bytes in [0, 32, 100, 512] {
        assert!(matches!(
            LineSize::new(bytes),
            Err(Error::UnsupportedConfiguration { .. })
        ));
    }
    assert_eq!(LineSize::new(128).unwrap(), LineSize::B128);
    let dir = tempdir("bad-length");
    let err = MmapRegion::open(&dir.join("r"), 1000).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(!dir.join("r").exists(), "a refused region leaves no file");
    std::fs::write(dir.join("odd"), [0u8; 300]).unwrap();
    let err = MmapRegion::open(&dir.join("odd"), 4096).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[should_panic(expected = "not inside")]
fn a_store_past_the_end_panics_instead_of_writing_elsewhere() {
    let (_device, region) = simulated(8);
    region
        .writer()
        .store(LEN as u64 - 4, &[1; 8], Purpose::Content);
}

// ---- the simulated device ----

#[test]
fn a_persist_point_scheduled_to_lose_power_fails_and_kills_the_mapping() {
    let (device, region) = simulated(9);
    let mut writer = region.writer();
    writer.store(0, b"persisted", Purpose::Content);
    writer.persist().unwrap();
    device.crash_at_persist(1);
    writer.store(1024, b"maybe", Purpose::Content);
    assert!(matches!(writer.persist(), Err(Error::Io { .. })));
    // Dead: later persists fail too, whatever they hold.
    writer.store(2048, b"never", Purpose::Content);
    assert!(writer.persist().is_err());
    assert_eq!(region.stats().persist_points, 1);
    drop(writer);
    drop(region);
    let image = device.durable_image();
    assert_eq!(&image[..9], b"persisted");
    assert!(
        image[2048..2053].iter().all(|&b| b == 0),
        "nothing after the power loss"
    );
    // One word: the unpersisted store survives whole or not at all.
    let maybe = &image[1024..1029];
    assert!(
        maybe == b"maybe" || maybe.iter().all(|&b| b == 0),
        "{maybe:?}"
    );
    // The device maps again after the power loss, from its image.
    let again = Region::new(device.map().unwrap(), LineSize::B256).unwrap();
    let mut bytes = [0u8; 9];
    again.read(0, &mut bytes);
    assert_eq!(&bytes, b"persisted");
}

/// A failed persist counts nothing and keeps its lines dirty, and the region refuses every
/// later persist point, of every writer: after a failed msync a later one may succeed
/// although the failed one's pages were lost, as after a failed fsync.
#[test]
fn a_failed_persist_counts_nothing_and_fails_every_later_persist() {
    let (device, region) = simulated(10);
    let mut writer = region.writer();
    writer.store(300, &[9; 8], Purpose::Content);
    device.fail_persist(1);
    assert!(matches!(writer.persist(), Err(Error::Io { .. })));
    assert!(region.has_failed());
    assert_eq!(writer.dirty_lines(), 1);
    assert_eq!(region.stats().lines_persisted(), 0);
    assert!(device.durable_image()[300..308].iter().all(|&b| b == 0));
    assert!(matches!(
        writer.persist(),
        Err(Error::DurabilityLost { .. })
    ));
    let mut other = region.writer();
    other.store_u64(1024, 1, Purpose::Content);
    assert!(matches!(other.persist(), Err(Error::DurabilityLost { .. })));
    assert!(device.durable_image()[300..308].iter().all(|&b| b == 0));
    assert_eq!(
        device.persists(),
        1,
        "nothing reached the device after the failure"
    );
}

/// A mapping that lost power and is dropped after the device was mapped again must not
/// take the new mapping's place.
#[test]
fn dropping_a_dead_mapping_leaves_the_live_one_alone() {
    let device = SimulatedRegion::new(LEN, 35);
    let dead = device.map().unwrap();
    device.crash();
    let live = Region::new(device.map().unwrap(), LineSize::B256).unwrap();
    drop(dead);
    assert_eq!(
        device.map().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
    let mut writer = live.writer();
    writer.store_u64(0, 7, Purpose::Content);
    writer.persist().unwrap();
    assert_eq!(&device.durable_image()[..8], &7u64.to_le_bytes());
}

#[test]
fn a_second_mapping_is_refused_while_one_is_live() {
    let device = SimulatedRegion::new(LEN, 11);
    let first = device.map().unwrap();
    assert_eq!(
        device.map().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
    assert_eq!(first.kind(), RegionKind::Simulated);
    drop(first);
    device.map().unwrap();
}

#[test]
fn a_process_exit_keeps_unpersisted_stores_until_a_power_loss_decides_them() {
    let kept = (0..64).filter(|&seed| {
        let (device, region) = simulated(seed);
        let mut writer = region.writer();
        writer.store(512, &[5; 8], Purpose::Content);
        drop(writer);
        drop(region); // the process exits; nothing was persisted
        let reopened = Region::new(device.map().unwrap(), LineSize::B256).unwrap();
        assert_eq!(
            reopened.load_u64(512, Ordering::Relaxed),
            u64::from_le_bytes([5; 8])
        );
        drop(reopened);
        device.crash();
        let after = Region::new(device.map().unwrap(), LineSize::B256).unwrap();
        let word = after.load_u64(512, Ordering::Relaxed);
        assert!(word == 0 || word == u64::from_le_bytes([5; 8]), "{word:#x}");
        word != 0
    });
    let kept = kept.count();
    assert!(
        kept > 0 && kept < 64,
        "a power loss keeps an unpersisted word on some seeds only: {kept}"
    );
}

/// In units larger than a word, a power loss keeps a unit whole, and keeps some units and
/// drops others.
#[test]
fn a_power_loss_keeps_whole_units_on_some_seeds_and_drops_them_on_others() {
    for (unit, bytes) in [
        (AtomicUnit::CacheLine, 64usize),
        (AtomicUnit::MediaLine, 256),
    ] {
        let (mut kept, mut dropped) = (0, 0);
        for seed in 0..32 {
            let (device, region) = simulated(seed);
            device.set_atomic_unit(unit);
            let mut writer = region.writer();
            writer.store(1024, &vec![0xAB; bytes], Purpose::Content);
            device.crash();
            let image = device.durable_image();
            let unit_bytes = &image[1024..1024 + bytes];
            if unit_bytes.iter().all(|&b| b == 0xAB) {
                kept += 1;
            } else {
                assert!(unit_bytes.iter().all(|&b| b == 0), "{unit:?}: a torn unit");
                dropped += 1;
            }
        }
        assert!(
            kept > 0 && dropped > 0,
            "{unit:?}: kept {kept}, dropped {dropped}"
        );
    }
}

#[test]
fn the_same_seed_replays_the_same_power_loss() {
    let image = |seed| {
        let (device, region) = simulated(seed);
        let mut writer = region.writer();
        for i in 0..64u64 {
            writer.store_u64(i * 64, i + 1, Purpose::Content);
        }
        device.crash();
        device.durable_image()
    };
    assert!(image(12) == image(12), "one seed, one image");
    assert!(image(12) != image(13), "another seed, another image");
}

/// One step of a crash scenario.
#[derive(Clone, Debug)]
enum Step {
    Store { at: u64, bytes: Vec<u8> },
    Word { at: u64, value: u64 },
    Persist,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (
            0..LEN as u64 - 40,
            prop::collection::vec(any::<u8>(), 1..40)
        )
            .prop_map(|(at, bytes)| Step::Store { at, bytes }),
        (0..LEN as u64 / 8, any::<u64>()).prop_map(|(w, value)| Step::Word { at: w * 8, value }),
        Just(Step::Persist),
    ]
}

fn unit_strategy() -> impl Strategy<Value = (AtomicUnit, usize)> {
    prop_oneof![
        Just((AtomicUnit::Word, 8)),
        Just((AtomicUnit::CacheLine, 64)),
        Just((AtomicUnit::MediaLine, 256)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// After a power loss every unit holds either what was last persisted of it or the last
    /// value stored into it, whole; a persisted unit not stored into again is exact. Reads
    /// see every store, at any offset, with its neighbours' bytes kept.
    #[test]
    fn a_power_loss_keeps_what_was_persisted_and_any_units_of_the_rest(
        seed in any::<u64>(),
        line in prop_oneof![Just(LineSize::B256), Just(LineSize::B128), Just(LineSize::B64)],
        (unit, unit_bytes) in unit_strategy(),
        steps in prop::collection::vec(step(), 1..60),
    ) {
        let device = SimulatedRegion::new(LEN, seed);
        device.set_atomic_unit(unit);
        let region = Region::new(device.map().unwrap(), line).unwrap();
        let mut writer = region.writer();
        let mut working = vec![0u8; LEN];
        let mut durable = vec![0u8; LEN];
        let mut dirty = std::collections::BTreeSet::new();
        let line_bytes = line.bytes() as usize;
        for step in &steps {
            match step {
                Step::Store { at, bytes } => {
                    writer.store(*at, bytes, Purpose::Content);
                    let at = *at as usize;
                    working[at..at + bytes.len()].copy_from_slice(bytes);
                    dirty.extend(at / line_bytes..=(at + bytes.len() - 1) / line_bytes);
                }
                Step::Word { at, value } => {
                    writer.store_u64(*at, *value, Purpose::BlockMetadata);
                    let at = *at as usize;
                    working[at..at + 8].copy_from_slice(&value.to_le_bytes());
                    dirty.insert(at / line_bytes);
                }
                Step::Persist => {
                    let report = writer.persist().unwrap();
                    prop_assert_eq!(report.lines as usize, dirty.len());
                    for l in std::mem::take(&mut dirty) {
                        let r = l * line_bytes..(l + 1) * line_bytes;
                        durable[r.clone()].copy_from_slice(&working[r]);
                    }
                }
            }
        }
        let mut seen = vec![0u8; LEN];
        region.read(0, &mut seen);
        prop_assert_eq!(&seen, &working);
        prop_assert_eq!(device.durable_image(), durable.clone());
        device.crash();
        let image = device.durable_image();
        for start in (0..LEN).step_by(unit_bytes) {
            let r = start..start + unit_bytes;
            prop_assert!(
                image[r.clone()] == durable[r.clone()] || image[r.clone()] == working[r.clone()],
                "unit at {} is neither persisted nor stored whole", start
            );
        }
    }
}

// ---- the memory-mapped backends ----

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("pmem-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(target_os = "linux")]
#[test]
fn an_mmap_region_keeps_what_was_stored_across_reopening_and_msyncs_on_disk() {
    let dir = tempdir("disk");
    let path = dir.join("region.pmem");
    {
        let backend = Arc::new(MmapRegion::open(&path, 1 << 20).unwrap());
        assert_eq!(
            backend.kind(),
            RegionKind::Msync,
            "the target directory is on a disk"
        );
        let region = Region::new(backend, LineSize::B256).unwrap();
        let mut writer = region.writer();
        writer.store(4000, b"across a reopening", Purpose::Content);
        writer.store(70_000, b"two runs", Purpose::Content);
        // Bytes 4000..4018 lie in line 15, bytes 70000..70008 in line 273.
        assert_eq!(writer.persist().unwrap().lines, 2);
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
    // An existing file keeps its length, whatever length a new one would get.
    let region = Region::new(
        Arc::new(MmapRegion::open(&path, 4096).unwrap()),
        LineSize::B64,
    )
    .unwrap();
    assert_eq!(region.len(), 1 << 20);
    let mut bytes = [0u8; 18];
    region.read(4000, &mut bytes);
    assert_eq!(&bytes, b"across a reopening");
    drop(region);
    std::fs::remove_dir_all(dir).unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn an_mmap_region_on_tmpfs_is_emulated() {
    let shm = std::path::Path::new("/dev/shm");
    assert!(shm.is_dir(), "Linux mounts a tmpfs at /dev/shm");
    let path = shm.join(format!("verso-pmem-test-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let backend = Arc::new(MmapRegion::open(&path, 1 << 16).unwrap());
    std::fs::remove_file(&path).unwrap(); // the mapping outlives the name
    assert_eq!(backend.kind(), RegionKind::Emulated);
    let region = Region::new(backend, LineSize::B256).unwrap();
    let mut writer = region.writer();
    writer.fetch_or_u64(256, 0b101, Purpose::BlockMetadata);
    assert_eq!(writer.persist().unwrap().lines, 1);
    assert_eq!(region.load_u64(256, Ordering::Acquire), 0b101);
}

#[test]
fn the_emulated_delay_follows_the_write_share_of_drams_bandwidth() {
    // 1 GB/s: a 256-byte line takes 256 ns in DRAM; at half the bandwidth 256 ns more, at
    // 30% 256 × (1/0.3 - 1) ns; at the full bandwidth nothing.
    let bw = 1e9;
    assert_eq!(
        emulated_line_delay(LineSize::B256, 1.0, bw).unwrap(),
        Duration::ZERO
    );
    assert_eq!(
        emulated_line_delay(LineSize::B256, 0.5, bw).unwrap(),
        Duration::from_nanos(256)
    );
    assert_eq!(
        emulated_line_delay(LineSize::B64, 0.5, bw).unwrap(),
        Duration::from_nanos(64)
    );
    let optane = emulated_line_delay(LineSize::B256, 0.3, bw)
        .unwrap()
        .as_nanos();
    assert!((597..=598).contains(&optane), "{optane}");
    for share in [0.0, -0.5, 1.5, f64::NAN] {
        assert!(matches!(
            emulated_line_delay(LineSize::B256, share, bw),
            Err(Error::UnsupportedConfiguration { .. })
        ));
    }
    assert!(emulated_line_delay(LineSize::B256, 0.5, 0.0).is_err());
    let measured = measure_dram_write_bandwidth(8 << 20);
    assert!(measured.is_finite() && measured > 1e8, "{measured} bytes/s");
}

const KILL_CHILD_REGION: &str = "VERSO_PMEM_KILL_CHILD_REGION";

/// The child of the kill test: stores a counter into the region and persists it, over and
/// over, printing each value once its persist point returned, until it is killed.
#[test]
fn pmem_kill_child() {
    let Ok(path) = std::env::var(KILL_CHILD_REGION) else {
        return; // Run by the harness itself: nothing to do.
    };
    let backend = Arc::new(MmapRegion::open(std::path::Path::new(&path), 1 << 16).unwrap());
    let region = Region::new(backend, LineSize::B256).unwrap();
    let mut writer = region.writer();
    let mut out = std::io::stdout();
    for value in 1u64.. {
        // The value in two words of two lines, so a kill between them would show.
        writer.store_u64(0, value, Purpose::Content);
        writer.store_u64(4096, value, Purpose::Content);
        writer.persist().unwrap();
        std::io::Write::write_all(&mut out, format!("{value}\n").as_bytes()).unwrap();
        std::io::Write::flush(&mut out).unwrap();
    }
}

/// A region on tmpfs survives a process crash: after SIGKILL every value the child reported
/// persisted is there (the region holds it or a later one), in both words.
#[cfg(target_os = "linux")]
#[test]
fn an_emulated_region_keeps_every_persisted_store_across_sigkill() {
    use std::io::BufRead;
    let path =
        std::path::Path::new("/dev/shm").join(format!("verso-pmem-kill-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let exe = std::env::current_exe().unwrap();
    // `PM_KILLS` kills (default 5; the documented longer run: `PM_KILLS=200 cargo test
    // --release -p verso --test pmem sigkill`).
    let kills: u64 = std::env::var("PM_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    for run in 0..kills {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "pmem_kill_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(KILL_CHILD_REGION, &path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut reported = 0u64;
        let target = 1_000 * (run % 8 + 1);
        while reported < target {
            match lines.next() {
                Some(Ok(line)) => reported = line.trim().parse().unwrap_or(reported),
                _ => panic!("the child ended before it was killed"),
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let region = Region::new(
            Arc::new(MmapRegion::open(&path, 1 << 16).unwrap()),
            LineSize::B256,
        )
        .unwrap();
        let (first, second) = (
            region.load_u64(0, Ordering::Acquire),
            region.load_u64(4096, Ordering::Acquire),
        );
        assert!(
            first >= reported,
            "run {run}: {reported} was persisted, the region holds {first}"
        );
        assert!(
            second + 1 >= first && second <= first,
            "run {run}: words {first} and {second}"
        );
        // The next child starts counting from 1 again over the same file.
    }
    std::fs::remove_file(&path).unwrap();
}

/// `PmStats::versions_held`, under each storage over the region: every row's newest plus
/// each old version whose space is not reclaimed. Without a collector it counts every
/// version written; under a held snapshot a collector keeps what the snapshot reads; once
/// the snapshot ends and everything is collected, only the newest versions are left (the
/// tile-block storage's relocated copies of them included, its freed blocks' versions
/// not; the delta storage's released partitions not).
#[test]
fn versions_held_counts_what_each_region_storage_has_not_reclaimed() {
    use verso::pmem::PmOptions;
    use verso::{
        ConcurrencyControl, Database, GarbageCollector, Options, Value, VersionStorageKind,
    };
    #[path = "common/region.rs"]
    mod region;
    const ROWS: u64 = 40;
    const UPDATES: u64 = 4;
    let configurations = [
        (
            VersionStorageKind::AppendNvm,
            GarbageCollector::NoCollection,
        ),
        (VersionStorageKind::AppendNvm, GarbageCollector::Tvcp),
        (
            VersionStorageKind::TileBlock,
            GarbageCollector::NoCollection,
        ),
        (VersionStorageKind::TileBlock, GarbageCollector::TbCollect),
        (VersionStorageKind::DeltaNvm, GarbageCollector::NoCollection),
        (VersionStorageKind::DeltaNvm, GarbageCollector::OneShot),
    ];
    for (storage, gc) in configurations {
        let db = Database::open(
            Options::default()
                .version_storage(storage)
                .concurrency_control(ConcurrencyControl::Mvto)
                .garbage_collector(gc)
                .persistent_memory(PmOptions::default().capacity_bytes(64 << 20)),
        )
        .unwrap();
        let table = region::table(&db, "t");
        for id in 0..ROWS {
            region::insert(&db, table, id, 20);
        }
        assert_eq!(region::pm(&db).versions_held, ROWS, "{storage:?}/{gc:?}");
        let held = db.begin(verso::Isolation::Serializable);
        for n in 1..=UPDATES {
            for id in 0..ROWS {
                region::update(&db, table, id, n, 20);
            }
        }
        let under_snapshot = region::pm(&db).versions_held;
        if gc == GarbageCollector::NoCollection {
            assert_eq!(under_snapshot, ROWS * (1 + UPDATES), "{storage:?}");
        } else {
            // The snapshot's versions and the newest are held at least.
            assert!(
                (2 * ROWS..=ROWS * (1 + UPDATES)).contains(&under_snapshot),
                "{storage:?}/{gc:?}: {under_snapshot}"
            );
        }
        for id in 0..ROWS {
            assert_eq!(
                held.get(table, &[Value::U64(id)]).unwrap().unwrap()[1],
                region::text(0, 20)
            );
        }
        held.commit().unwrap();
        db.collect_garbage();
        let after = region::pm(&db).versions_held;
        if gc == GarbageCollector::NoCollection {
            assert_eq!(
                after,
                ROWS * (1 + UPDATES),
                "{storage:?}: nothing reclaimed"
            );
        } else {
            assert_eq!(after, ROWS, "{storage:?}/{gc:?}: the newest versions only");
        }
    }
}
