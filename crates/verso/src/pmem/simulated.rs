//! A simulated persistent-memory device for crash tests: what was persisted survives a
//! power loss; of what was not, any subset survives, in units the hardware stores
//! atomically (8-byte words on x86 with ADR), each unit chosen independently, so stores are
//! reordered freely. Persist points can be made to crash or to fail.
//!
//! Definitions:
//! - The *device* ([`SimulatedRegion`]) holds the durable image. A *mapping*
//!   ([`SimulatedMapping`], the [`RegionBackend`]) holds the working image that loads and
//!   stores see; [`SimulatedRegion::map`] makes one from the device's image.
//! - A *power loss* ([`SimulatedRegion::crash`], or a persist point scheduled to crash)
//!   decides the device's new image from the live mapping's working image: every unit that
//!   differs from the durable image keeps the working value with probability ½. The mapping
//!   is dead from then on: its persists fail with an I/O error, and stores into it (its
//!   memory stays valid) reach nothing.
//! - Dropping a mapping without a power loss is a process exit: the operating system keeps
//!   the memory (as the page cache keeps an mmapped file), so the next mapping starts from
//!   the dropped one's working image, still undecided: a later power loss decides it.
//!
//! Invariants:
//! - At most one live mapping per device (a second [`SimulatedRegion::map`] is refused, as
//!   a second process is by the database's lock).
//! - After a power loss, every unit of the image equals the value it had at the last
//!   persist of a line holding it, or the last value stored into it before the power loss:
//!   never a value nobody stored, never a persisted value rolled back.
//!
//! What the model does not produce: real hardware may write a line back at any moment (an
//! eviction), so a unit stored twice between two persist points may survive with its
//! *first* new value. The simulation keeps only the persisted or the last one. A design
//! checked here must not conclude "not the persisted value, so the last one": the
//! tile-block storage never does (its records are written once, and recovery never trusts
//! the update bitmap, the one place written several times between persist points).
//! - Everything random comes from one seed, so a single-threaded run replays exactly.

use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{RegionBackend, RegionKind, REGION_ALIGN};
use crate::fs::simulated::Rng;

/// The unit a power loss keeps or drops whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AtomicUnit {
    /// 8-byte words: what x86 promises (aligned 8-byte stores are failure-atomic). The
    /// strictest model, and the default.
    #[default]
    Word,
    /// 64-byte cache lines: a model in which a line reaches the media whole.
    CacheLine,
    /// 256-byte media lines (Optane's write unit).
    MediaLine,
}

impl AtomicUnit {
    fn words(self) -> usize {
        match self {
            AtomicUnit::Word => 1,
            AtomicUnit::CacheLine => 8,
            AtomicUnit::MediaLine => 32,
        }
    }
}

/// A simulated persistent-memory device. Cloning gives another handle on the same device,
/// so a test keeps one across the database's reopenings.
#[derive(Clone)]
pub struct SimulatedRegion {
    device: Arc<Mutex<Device>>,
}

struct Device {
    rng: Rng,
    unit: AtomicUnit,
    /// What survives a power loss now.
    durable: Vec<u64>,
    /// The working image of a mapping dropped without a power loss (a process exit): what
    /// the next mapping starts from; undecided until a power loss.
    exited: Option<Arc<[AtomicU64]>>,
    /// The working image of the live mapping, if any (shared with it, so that a power loss
    /// can decide the image without reaching the mapping itself).
    live: Option<Arc<[AtomicU64]>>,
    /// Bumped at every power loss: mappings of an older generation are dead.
    generation: u64,
    /// Persist points the device has been asked for, counting failed and crashed ones.
    persists: u64,
    /// The persist point (by `persists` count) that loses power instead of persisting.
    crash_at: Option<u64>,
    /// The persist point that fails with an I/O error, persisting nothing.
    fail_at: Option<u64>,
}

impl fmt::Debug for SimulatedRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let device = self.lock();
        f.debug_struct("SimulatedRegion")
            .field("bytes", &(device.durable.len() * 8))
            .field("unit", &device.unit)
            .field("generation", &device.generation)
            .field("persists", &device.persists)
            .finish()
    }
}

impl SimulatedRegion {
    /// A zeroed device of `len` bytes (a non-zero multiple of [`REGION_ALIGN`]) whose random
    /// choices come from `seed`.
    ///
    /// # Panics
    /// If `len` is not such a multiple.
    pub fn new(len: usize, seed: u64) -> SimulatedRegion {
        assert!(
            len > 0 && len % REGION_ALIGN == 0,
            "a simulated region is a non-zero multiple of {REGION_ALIGN} bytes, not {len}"
        );
        SimulatedRegion {
            device: Arc::new(Mutex::new(Device {
                rng: Rng::new(seed),
                unit: AtomicUnit::Word,
                durable: vec![0; len / 8],
                exited: None,
                live: None,
                generation: 0,
                persists: 0,
                crash_at: None,
                fail_at: None,
            })),
        }
    }

    /// A device whose durable image is `image` (a non-zero multiple of [`REGION_ALIGN`]
    /// bytes): for tests that feed recovery a region they built or mutated.
    ///
    /// # Panics
    /// If `image`'s length is not such a multiple.
    pub fn from_image(image: &[u8], seed: u64) -> SimulatedRegion {
        let device = SimulatedRegion::new(image.len(), seed);
        device.lock().durable = image
            .chunks_exact(8)
            .map(|word| u64::from_le_bytes(word.try_into().expect("8 bytes")))
            .collect();
        device
    }

    /// Whether `other` is a handle on the same device.
    pub fn same_device(&self, other: &SimulatedRegion) -> bool {
        Arc::ptr_eq(&self.device, &other.device)
    }

    /// Sets the unit a power loss keeps or drops whole (from the next power loss on).
    pub fn set_atomic_unit(&self, unit: AtomicUnit) {
        self.lock().unit = unit;
    }

    /// A mapping of the device: its working image starts as the device's image. Refused
    /// with [`io::ErrorKind::WouldBlock`] while another mapping is live.
    pub fn map(&self) -> io::Result<Arc<SimulatedMapping>> {
        let mut device = self.lock();
        if device.live.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the simulated persistent-memory region is mapped already",
            ));
        }
        let working: Arc<[AtomicU64]> = match device.exited.take() {
            Some(working) => working,
            None => device.durable.iter().map(|&w| AtomicU64::new(w)).collect(),
        };
        device.live = Some(Arc::clone(&working));
        Ok(Arc::new(SimulatedMapping {
            device: Arc::clone(&self.device),
            generation: device.generation,
            working,
        }))
    }

    /// A power loss now: decides the device's image (see the module's documentation) and
    /// kills the live mapping, if any.
    pub fn crash(&self) {
        let mut device = self.lock();
        let working = device.live.take().or_else(|| device.exited.take());
        match working {
            Some(working) => device.lose_power(&working),
            None => device.generation += 1,
        }
    }

    /// Makes the `n`-th persist point from now (1 = the next) lose power instead of
    /// persisting: it fails, and the device's image is decided as by [`SimulatedRegion::crash`].
    pub fn crash_at_persist(&self, n: u64) {
        let mut device = self.lock();
        device.crash_at = Some(device.persists + n.max(1));
    }

    /// Makes the `n`-th persist point from now (1 = the next) fail with an I/O error,
    /// persisting nothing; the mapping stays live.
    pub fn fail_persist(&self, n: u64) {
        let mut device = self.lock();
        device.fail_at = Some(device.persists + n.max(1));
    }

    /// Persist points asked of the device so far (failed and crashed ones included).
    pub fn persists(&self) -> u64 {
        self.lock().persists
    }

    /// What would survive a power loss now that keeps nothing unpersisted: the durable
    /// image's bytes.
    pub fn durable_image(&self) -> Vec<u8> {
        self.lock()
            .durable
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, Device> {
        self.device.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Device {
    /// Decides the image from `working`: each unit that differs from the durable image
    /// keeps its working value with probability ½. Kills every mapping of this generation.
    fn lose_power(&mut self, working: &[AtomicU64]) {
        let unit = self.unit.words();
        let mut seen = Vec::with_capacity(unit);
        for (durable, working) in self.durable.chunks_mut(unit).zip(working.chunks(unit)) {
            // Each word loaded once: threads still storing cannot make the unit compared
            // differ from the unit kept.
            seen.clear();
            seen.extend(working.iter().map(|w| w.load(Ordering::Relaxed)));
            if seen.as_slice() != &*durable && self.rng.chance(50) {
                durable.copy_from_slice(&seen);
            }
        }
        self.live = None;
        self.exited = None;
        self.generation += 1;
    }
}

/// A live mapping of a [`SimulatedRegion`]: the [`RegionBackend`] a test gives the engine.
pub struct SimulatedMapping {
    device: Arc<Mutex<Device>>,
    generation: u64,
    /// Also held by the device while this mapping is live.
    working: Arc<[AtomicU64]>,
}

impl fmt::Debug for SimulatedMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulatedMapping")
            .field("bytes", &(self.working.len() * 8))
            .field("generation", &self.generation)
            .finish()
    }
}

impl SimulatedMapping {
    fn device(&self) -> MutexGuard<'_, Device> {
        self.device.lock().unwrap_or_else(|e| e.into_inner())
    }
}

// SAFETY: `base` points at the first of the mapping's `len() / 8` words, with provenance
// over all of them (taken from the slice); the words live in an `Arc` the mapping holds
// for its whole life, at a fixed address; the device reads them only with atomic loads.
#[allow(unsafe_code)]
unsafe impl RegionBackend for SimulatedMapping {
    fn base(&self) -> NonNull<u8> {
        // From the slice, not its first element: the pointer must cover every word.
        NonNull::new(self.working.as_ptr().cast_mut())
            .expect("a slice's pointer is never null")
            .cast()
    }

    fn len(&self) -> usize {
        self.working.len() * 8
    }

    fn persist(&self, lines: &[u64], line_bytes: u32) -> io::Result<()> {
        let mut device = self.device();
        if self.generation != device.generation {
            return Err(io::Error::other(
                "the simulated persistent-memory region lost power",
            ));
        }
        device.persists += 1;
        let n = device.persists;
        if device.crash_at == Some(n) {
            device.crash_at = None;
            device.lose_power(&self.working);
            return Err(io::Error::other(
                "the simulated persistent-memory region lost power during a persist",
            ));
        }
        if device.fail_at == Some(n) {
            device.fail_at = None;
            return Err(io::Error::other("simulated media error persisting lines"));
        }
        let words_per_line = line_bytes as usize / 8;
        for &line in lines {
            let first = line as usize * words_per_line;
            let end = (first + words_per_line).min(self.working.len());
            for i in first..end {
                device.durable[i] = self.working[i].load(Ordering::Relaxed);
            }
        }
        Ok(())
    }

    fn kind(&self) -> RegionKind {
        RegionKind::Simulated
    }

    fn describe(&self) -> String {
        "simulated persistent-memory region".to_string()
    }
}

impl Drop for SimulatedMapping {
    fn drop(&mut self) {
        let mut device = self.device();
        if self.generation == device.generation {
            // A process exit without a power loss: the memory is kept, undecided.
            device.exited = device.live.take();
        }
    }
}
