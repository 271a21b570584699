//! The process's resident memory, read from `/proc/self/statm` (Linux): cheap enough to
//! read every second, and no crate needed.

use std::io::{BufRead, BufReader};
use std::sync::OnceLock;

/// Resident set size of this process in bytes, or `None` where `/proc` is not available.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    // Fields: size resident shared text lib data dt, in pages.
    let resident_pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(resident_pages * page_size())
}

/// Resident memory of this process not backed by a file or shared memory (`statm`'s
/// resident minus shared pages), or `None` where `/proc` is not available: the process's
/// own DRAM (heap, stacks), without the pages of a mapped file. The persistent-memory
/// region the tile-block, append-nvm and delta-nvm storages map from a tmpfs file is
/// shared memory, so this is the DRAM beside it (TB-Collect's Fig. 12 measures the two
/// apart).
pub fn anonymous_resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let mut fields = statm.split_whitespace().skip(1);
    let resident_pages: u64 = fields.next()?.parse().ok()?;
    let shared_pages: u64 = fields.next()?.parse().ok()?;
    Some(resident_pages.saturating_sub(shared_pages) * page_size())
}

/// The kernel's page size in bytes: `statm` counts pages. Read once from the first
/// `KernelPageSize` line of `/proc/self/smaps` (no libc call needed); 4 KiB if that fails.
pub fn page_size() -> u64 {
    static PAGE_SIZE: OnceLock<u64> = OnceLock::new();
    *PAGE_SIZE.get_or_init(|| read_page_size().unwrap_or(4096))
}

fn read_page_size() -> Option<u64> {
    let smaps = std::fs::File::open("/proc/self/smaps").ok()?;
    for line in BufReader::new(smaps).lines() {
        let line = line.ok()?;
        if let Some(rest) = line.strip_prefix("KernelPageSize:") {
            let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            return Some(kib * 1024);
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// These tests measure the whole process's memory while touching and freeing 64 MiB:
    /// run at once, one's free shrank the other's measurement (a fresh-clone CI failed
    /// so). Each holds this lock while it measures, and so does every other unit test
    /// that allocates and frees that much (`pm_media`'s bandwidth measurement).
    static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    pub(crate) fn measuring() -> std::sync::MutexGuard<'static, ()> {
        MEASURING.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn resident_memory_grows_with_a_touched_allocation() {
        let _alone = measuring();
        let Some(before) = resident_bytes() else {
            return; // not Linux: nothing to measure
        };
        assert!(before > 0);
        assert!(page_size().is_power_of_two() && page_size() >= 4096);
        // 64 MiB, every page written, so it must become resident.
        let block = vec![1u8; 64 << 20];
        let after = resident_bytes().unwrap_or(0);
        assert!(
            after >= before + (48 << 20),
            "RSS {before} -> {after} after touching 64 MiB"
        );
        drop(block);
    }

    #[test]
    fn anonymous_memory_is_part_of_resident_memory_and_grows_with_the_heap() {
        let _alone = measuring();
        let (Some(resident), Some(before)) = (resident_bytes(), anonymous_resident_bytes()) else {
            return; // not Linux: nothing to measure
        };
        assert!(before > 0 && before <= resident, "{before} of {resident}");
        let block = vec![1u8; 64 << 20];
        let after = anonymous_resident_bytes().unwrap_or(0);
        assert!(
            after >= before + (48 << 20),
            "anonymous memory {before} -> {after} after touching 64 MiB of heap"
        );
        drop(block);
    }
}
