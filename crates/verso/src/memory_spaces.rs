//! Separate memory spaces for the version storage (Wu et al. §4.4).
//!
//! "All of the storage schemes require the DBMS to allocate memory for each transaction from
//! centralized data structures [...]. To avoid this problem, the DBMS can maintain separate
//! memory spaces for each centralized structure [...] and expand them in fixed-size
//! increments. Each worker thread then acquires memory from a single space."
//!
//! Definitions:
//! - A *memory space* is a segregated-fit allocator guarded by one mutex: per size class a
//!   free list, and a bump range in its newest chunk. It grows by [`CHUNK_BYTES`] (512 KiB,
//!   the paper's increment) carved from one region of address space reserved once
//!   ([`REGION_BYTES`], committed by the OS page by page as it is touched).
//! - A thread *allocates in* space `k` while an [`allocate_in`] guard says so: the engine
//!   sets it around the version storage's inserts and writes (new rows, new versions,
//!   before-images, time-travel copies, out-of-line values), with `k` = the thread's number
//!   modulo [`Options::memory_spaces`](crate::Options::memory_spaces). Every other
//!   allocation, and every one too large or too aligned for a size class, goes to the
//!   wrapped allocator.
//! - [`MemorySpaces`] is the global allocator that does this; a binary installs it around
//!   its own (`#[global_allocator]`). `Database::open` refuses memory spaces when it is not
//!   installed.
//!
//! Invariants:
//! - A block is in a space exactly when its address lies in the region; the chunk it lies
//!   in says which space (`CHUNK_SPACE`), so any thread frees it back to that space's free
//!   list, under that space's mutex.
//! - A block on a free list is unused and at least 16 bytes (every class is), its first
//!   word the address of the next free block of its class (0 ends the list).
//! - `dealloc` gets the layout `alloc` got (the `GlobalAlloc` contract), so the block's
//!   class is its size's class.
//! - Nothing here allocates through the global allocator (the spaces are statics, the
//!   region comes from `mmap`, the mutexes are `std`'s futex-based ones on Linux, the only
//!   platform spaces run on: elsewhere `std`'s mutex may allocate on first lock), so the
//!   allocator never re-enters itself.
//!
//! This module holds the `unsafe` of the allocator; each block is listed with its invariant
//! in `docs/unsafe.md`.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A space grows by this much at a time (Wu et al. §7.3: "in 512 KB increments").
pub const CHUNK_BYTES: usize = 512 * 1024;
/// The most memory spaces a database may ask for.
pub const MAX_MEMORY_SPACES: usize = 64;
/// Address space reserved for all spaces together (virtual; pages are committed as they are
/// first touched). Allocations beyond it fall back to the wrapped allocator.
#[cfg(target_pointer_width = "64")]
pub const REGION_BYTES: usize = 64 << 30;
/// Address space reserved for all spaces together (a 32-bit target has little to spare).
#[cfg(not(target_pointer_width = "64"))]
pub const REGION_BYTES: usize = 256 << 20;
const MAX_CHUNKS: usize = REGION_BYTES / CHUNK_BYTES;
/// The largest block a size class holds; larger allocations go to the wrapped allocator.
pub const MAX_CLASS_BYTES: usize = 8192;
/// Every block is aligned to this (the region and the chunks are page-aligned and every
/// class size is a multiple of it); more strictly aligned layouts go to the wrapped
/// allocator.
const BLOCK_ALIGN: usize = 16;

/// Size classes: 16-byte steps to 512 bytes, 64-byte steps to 2 KiB, 256-byte steps to
/// 8 KiB (a block wastes at most an eighth of itself beyond 512 bytes).
const CLASSES: usize = 32 + 24 + 24;

/// The class of a block of `size` bytes (`1..=MAX_CLASS_BYTES`).
fn class_of(size: usize) -> usize {
    debug_assert!(size > 0 && size <= MAX_CLASS_BYTES);
    if size <= 512 {
        (size - 1) / 16
    } else if size <= 2048 {
        32 + (size - 513) / 64
    } else {
        56 + (size - 2049) / 256
    }
}

/// The bytes a block of class `class` holds.
fn class_bytes(class: usize) -> usize {
    debug_assert!(class < CLASSES);
    if class < 32 {
        16 * (class + 1)
    } else if class < 56 {
        512 + 64 * (class - 31)
    } else {
        2048 + 256 * (class - 55)
    }
}

/// Not allocating in a space.
const NO_SPACE: u16 = u16::MAX;

thread_local! {
    /// The space this thread allocates in now, or `NO_SPACE`. Const-initialized and
    /// without a destructor, so reading it never allocates or fails.
    static CURRENT_SPACE: Cell<u16> = const { Cell::new(NO_SPACE) };
    /// This thread's number, once it has one (`usize::MAX`: not yet).
    static THREAD_NUMBER: Cell<usize> = const { Cell::new(usize::MAX) };
}

static NEXT_THREAD_NUMBER: AtomicUsize = AtomicUsize::new(0);

/// This thread's number: threads are numbered in the order they first ask.
pub(crate) fn thread_number() -> usize {
    THREAD_NUMBER.with(|number| {
        if number.get() == usize::MAX {
            number.set(NEXT_THREAD_NUMBER.fetch_add(1, Ordering::Relaxed));
        }
        number.get()
    })
}

/// The space the calling thread uses among `spaces`.
pub(crate) fn space_of_this_thread(spaces: usize) -> u16 {
    debug_assert!((1..=MAX_MEMORY_SPACES).contains(&spaces));
    (thread_number() % spaces) as u16
}

/// While alive, the calling thread's small allocations come from space `space` (none:
/// from the wrapped allocator). Restores what was set before when dropped.
#[must_use = "the space applies while the guard lives"]
pub(crate) struct SpaceGuard {
    previous: u16,
}

/// Allocate in `space` (if any) until the guard drops.
pub(crate) fn allocate_in(space: Option<u16>) -> SpaceGuard {
    let previous = CURRENT_SPACE.with(|current| current.replace(space.unwrap_or(NO_SPACE)));
    SpaceGuard { previous }
}

/// Whether the block at `address` lies in a memory space (a cache of freed blocks must not
/// keep it: it would serve allocations outside the space and keep the space's count up).
#[cfg(not(loom))]
pub(crate) fn in_a_space(address: usize) -> bool {
    space_of_address(address).is_some()
}

/// Whether the calling thread allocates in a memory space now (an [`allocate_in`] guard
/// with a space is alive). Caches of freed blocks must not serve such a thread: its
/// allocations are meant to come from its space.
#[cfg(not(loom))]
pub(crate) fn allocating_in_a_space() -> bool {
    CURRENT_SPACE.with(Cell::get) != NO_SPACE
}

impl Drop for SpaceGuard {
    fn drop(&mut self) {
        CURRENT_SPACE.with(|current| current.set(self.previous));
    }
}

/// One space's free lists and bump range. Addresses, 0 for none.
struct Space {
    free: [usize; CLASSES],
    bump: usize,
    end: usize,
    chunks: usize,
    blocks_in_use: usize,
}

static SPACES: [Mutex<Space>; MAX_MEMORY_SPACES] = [const {
    Mutex::new(Space {
        free: [0; CLASSES],
        bump: 0,
        end: 0,
        chunks: 0,
        blocks_in_use: 0,
    })
}; MAX_MEMORY_SPACES];
/// Which space each chunk of the region belongs to.
static CHUNK_SPACE: [AtomicU8; MAX_CHUNKS] = [const { AtomicU8::new(0) }; MAX_CHUNKS];
/// The region's first address: 0 until reserved, `usize::MAX` if reserving failed.
static REGION_BASE: AtomicUsize = AtomicUsize::new(0);
/// Chunks of the region handed out.
static CHUNKS_TAKEN: AtomicUsize = AtomicUsize::new(0);
/// Serializes reserving the region (once).
static RESERVING: Mutex<()> = Mutex::new(());
/// Set once the allocator has served any allocation: it is the global allocator.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Whether [`MemorySpaces`] is the process's global allocator.
pub fn memory_spaces_installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// What one memory space holds (see [`memory_space_usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemorySpaceUsage {
    /// Chunks of [`CHUNK_BYTES`] the space has grown by.
    pub chunks: usize,
    /// Blocks allocated from it and not freed.
    pub blocks_in_use: usize,
}

/// What each memory space holds, in space order.
pub fn memory_space_usage() -> [MemorySpaceUsage; MAX_MEMORY_SPACES] {
    std::array::from_fn(|space| {
        let state = lock(space);
        MemorySpaceUsage {
            chunks: state.chunks,
            blocks_in_use: state.blocks_in_use,
        }
    })
}

fn lock(space: usize) -> std::sync::MutexGuard<'static, Space> {
    // A panic never happens while a space is locked (nothing in here panics in release
    // builds); if a debug assertion did, the state is still consistent enough to go on.
    SPACES[space]
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The region's base address, reserving it on first use; `None` if it cannot be.
fn region() -> Option<usize> {
    match REGION_BASE.load(Ordering::Acquire) {
        0 => {}
        usize::MAX => return None,
        base => return Some(base),
    }
    let _reserving = RESERVING.lock().unwrap_or_else(|p| p.into_inner());
    if REGION_BASE.load(Ordering::Acquire) == 0 {
        REGION_BASE.store(reserve_region().unwrap_or(usize::MAX), Ordering::Release);
    }
    match REGION_BASE.load(Ordering::Acquire) {
        usize::MAX => None,
        base => Some(base),
    }
}

#[cfg(target_os = "linux")]
fn reserve_region() -> Option<usize> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches
    // no existing memory; MAP_NORESERVE keeps the reservation out of the commit charge, so
    // only pages written are backed. The result is checked before use.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            REGION_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (address != libc::MAP_FAILED).then_some(address as usize)
}

#[cfg(not(target_os = "linux"))]
fn reserve_region() -> Option<usize> {
    None
}

/// The space of the block at `address`, if it lies in the region.
fn space_of_address(address: usize) -> Option<usize> {
    let base = REGION_BASE.load(Ordering::Acquire);
    if base == 0 || base == usize::MAX || address < base || address >= base + REGION_BYTES {
        return None;
    }
    let chunk = (address - base) / CHUNK_BYTES;
    Some(usize::from(CHUNK_SPACE[chunk].load(Ordering::Acquire)))
}

/// A block of class `class` from space `space`, or `None` (the region is used up or could
/// not be reserved).
fn allocate_block(space: usize, class: usize) -> Option<usize> {
    let bytes = class_bytes(class);
    let mut state = lock(space);
    let block = if state.free[class] != 0 {
        let block = state.free[class];
        // SAFETY: `block` is on this space's free list, so it is an unused block of at
        // least 16 bytes in the region whose first word holds the next free block (module
        // invariants); it is read under the space's mutex, which every list change holds.
        state.free[class] = unsafe { (block as *const usize).read() };
        block
    } else {
        if state.bump + bytes > state.end {
            let base = region()?;
            let chunk = CHUNKS_TAKEN.fetch_add(1, Ordering::Relaxed);
            if chunk >= MAX_CHUNKS {
                return None;
            }
            CHUNK_SPACE[chunk].store(space as u8, Ordering::Release);
            // The rest of the old chunk (less than a block) is left unused.
            state.bump = base + chunk * CHUNK_BYTES;
            state.end = state.bump + CHUNK_BYTES;
            state.chunks += 1;
        }
        let block = state.bump;
        state.bump += bytes;
        block
    };
    state.blocks_in_use += 1;
    // Checked with the mutex released: a failed assertion allocates as it panics.
    drop(state);
    debug_assert_eq!(block % BLOCK_ALIGN, 0);
    debug_assert_eq!(space_of_address(block), Some(space));
    Some(block)
}

/// Returns the block at `address` (of class `class`) to space `space`'s free list.
fn free_block(space: usize, class: usize, address: usize) {
    let mut state = lock(space);
    // SAFETY: the caller frees a block it allocated with this class (the `GlobalAlloc`
    // contract), so it is at least 16 bytes of the region that nobody uses any more;
    // writing its first word under the space's mutex links it into the list.
    unsafe { (address as *mut usize).write(state.free[class]) };
    state.free[class] = address;
    state.blocks_in_use -= 1;
}

/// The global allocator that gives the engine's version storage separate memory spaces
/// (Wu et al. §4.4), wrapping `A` for everything else. Install it in a binary:
///
/// ```ignore
/// #[global_allocator]
/// static GLOBAL: verso::MemorySpaces<std::alloc::System> =
///     verso::MemorySpaces::new(std::alloc::System);
/// ```
///
/// and open the database with [`Options::memory_spaces`](crate::Options::memory_spaces).
/// Without a database asking for spaces it only passes allocations through (one
/// thread-local read on each allocation, one range check on each free).
pub struct MemorySpaces<A> {
    inner: A,
}

impl<A> MemorySpaces<A> {
    /// Memory spaces around `inner`.
    pub const fn new(inner: A) -> Self {
        MemorySpaces { inner }
    }
}

/// The space the calling thread allocates `layout` in, if any.
fn space_for(layout: Layout) -> Option<usize> {
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
    let space = CURRENT_SPACE.with(Cell::get);
    (space != NO_SPACE
        && layout.size() > 0
        && layout.size() <= MAX_CLASS_BYTES
        && layout.align() <= BLOCK_ALIGN)
        .then_some(usize::from(space))
}

// SAFETY: blocks from a space are at least `layout.size()` bytes (the class holds the
// size), aligned to 16 (which covers `layout.align()`, checked in `space_for`), unused
// until freed, and returned to the space they came from (found by address); everything
// else is `inner`'s, with `inner`'s guarantees. No allocation re-enters this allocator
// (module invariants).
unsafe impl<A: GlobalAlloc> GlobalAlloc for MemorySpaces<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let Some(space) = space_for(layout) {
            if let Some(block) = allocate_block(space, class_of(layout.size())) {
                return std::ptr::with_exposed_provenance_mut(block);
            }
        }
        // SAFETY: the caller's layout has a non-zero size (the `GlobalAlloc` contract).
        unsafe { self.inner.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let address = ptr.expose_provenance();
        match space_of_address(address) {
            Some(space) => free_block(space, class_of(layout.size()), address),
            // SAFETY: not in the region, so `inner` allocated it, with this layout.
            None => unsafe { self.inner.dealloc(ptr, layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller promises `new_size`, rounded up to `layout.align()`, does not
        // overflow `isize` (the `GlobalAlloc::realloc` contract), which is what a layout needs.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if space_of_address(ptr.expose_provenance()).is_none() && space_for(new_layout).is_none() {
            // Neither the old block nor the new one is a space's: `inner` may grow in place.
            // SAFETY: `inner` allocated `ptr` with `layout` (it is outside the region).
            return unsafe { self.inner.realloc(ptr, layout, new_size) };
        }
        // SAFETY: as in `alloc`; `new_layout` is valid (above).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks hold at least the bytes copied, and they are distinct
            // allocations; `ptr` was allocated with `layout` by this allocator.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if space_for(layout).is_some() {
            // SAFETY: as `alloc`; a block from a free list holds old bytes, so zero it.
            let block = unsafe { self.alloc(layout) };
            if !block.is_null() {
                // SAFETY: `alloc` returned at least `layout.size()` writable bytes.
                unsafe { block.write_bytes(0, layout.size()) };
            }
            return block;
        }
        // SAFETY: as in `alloc`.
        unsafe { self.inner.alloc_zeroed(layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_maps_to_the_smallest_class_that_holds_it() {
        let mut previous = 0;
        for class in 0..CLASSES {
            let bytes = class_bytes(class);
            assert!(
                bytes > previous && bytes % BLOCK_ALIGN == 0,
                "class {class}"
            );
            assert_eq!(class_of(bytes), class);
            assert_eq!(class_of(previous + 1), class, "class {class}");
            previous = bytes;
        }
        assert_eq!(previous, MAX_CLASS_BYTES);
    }

    /// Space 63 is this test's alone (the engine's tests run spaces 0-3 at most).
    const SPACE: usize = MAX_MEMORY_SPACES - 1;

    #[test]
    fn blocks_come_from_their_space_and_any_thread_returns_them_to_it() {
        if region().is_none() {
            return; // no mmap here: the allocator passes everything through
        }
        let sizes = [1, 16, 17, 100, 512, 513, 2048, 2049, 5000, MAX_CLASS_BYTES];
        let mut blocks = Vec::new();
        for round in 0..300 {
            for &size in &sizes {
                let class = class_of(size);
                let block = allocate_block(SPACE, class).expect("a block");
                assert_eq!(block % BLOCK_ALIGN, 0);
                assert_eq!(space_of_address(block), Some(SPACE));
                let fill = (round % 251) as u8;
                // SAFETY: the block is `class_bytes(class)` unused bytes of the region.
                unsafe { std::ptr::write_bytes(block as *mut u8, fill, size) };
                blocks.push((block, class, size, fill));
            }
        }
        // No two blocks overlap: each still holds what was written into it.
        for &(block, _, size, fill) in &blocks {
            // SAFETY: allocated above and not freed yet.
            let bytes = unsafe { std::slice::from_raw_parts(block as *const u8, size) };
            assert!(bytes.iter().all(|b| *b == fill), "block {block:#x}");
        }
        let usage = memory_space_usage()[SPACE];
        assert_eq!(usage.blocks_in_use, blocks.len());
        assert!(
            usage.chunks >= 2,
            "300 rounds of 27 KiB need several chunks"
        );
        // Freed by another thread, the blocks go back to space 63's lists.
        let addresses: Vec<(usize, usize)> = blocks.iter().map(|b| (b.0, b.1)).collect();
        std::thread::spawn(move || {
            for (block, class) in addresses {
                free_block(SPACE, class, block);
            }
        })
        .join()
        .expect("the freeing thread");
        assert_eq!(memory_space_usage()[SPACE].blocks_in_use, 0);
        // The next blocks of a class are the ones freed last (the lists are LIFO).
        let last_of_class = blocks
            .iter()
            .rev()
            .find(|b| b.1 == class_of(100))
            .expect("a block of that class")
            .0;
        let again = allocate_block(SPACE, class_of(100)).expect("a block");
        assert_eq!(again, last_of_class);
        free_block(SPACE, class_of(100), again);
        assert_eq!(
            memory_space_usage()[SPACE].chunks,
            usage.chunks,
            "reused, not grown"
        );
    }

    /// Space 62 is this test's alone.
    #[test]
    fn realloc_keeps_the_bytes_between_the_spaces_and_the_wrapped_allocator() {
        if region().is_none() {
            return;
        }
        let allocator = MemorySpaces::new(std::alloc::System);
        let small = Layout::from_size_align(40, 8).expect("layout");
        let fill = |ptr: *mut u8, len: usize| {
            // SAFETY: `ptr` holds at least `len` bytes the test allocated.
            unsafe { std::slice::from_raw_parts_mut(ptr, len) }
                .iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b = i as u8);
        };
        let check = |ptr: *mut u8, len: usize| {
            // SAFETY: as in `fill`.
            let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
            assert!(bytes.iter().enumerate().all(|(i, b)| *b == i as u8));
        };
        let in_space = |ptr: *mut u8| space_of_address(ptr as usize);
        // SAFETY: every pointer is this allocator's, freed once, with the layout it has.
        unsafe {
            // Outside any space: the wrapped allocator's, grown by its own realloc.
            let outside = allocator.alloc(small);
            assert_eq!(in_space(outside), None);
            fill(outside, 40);
            let grown = allocator.realloc(outside, small, 100);
            assert_eq!(in_space(grown), None);
            check(grown, 40);
            // Grown while a space is set: moved into the space, bytes kept.
            let _space = allocate_in(Some(MAX_MEMORY_SPACES as u16 - 2));
            let moved = allocator.realloc(grown, Layout::from_size_align(100, 8).unwrap(), 300);
            assert_eq!(in_space(moved), Some(MAX_MEMORY_SPACES - 2));
            check(moved, 40);
            // Beyond the classes: back to the wrapped allocator, bytes kept.
            let large = allocator.realloc(moved, Layout::from_size_align(300, 8).unwrap(), 9000);
            assert_eq!(in_space(large), None);
            check(large, 40);
            allocator.dealloc(large, Layout::from_size_align(9000, 8).unwrap());
        }
        assert_eq!(memory_space_usage()[MAX_MEMORY_SPACES - 2].blocks_in_use, 0);
    }

    #[test]
    fn the_guard_sets_the_space_and_restores_the_previous_one() {
        let current = || CURRENT_SPACE.with(Cell::get);
        assert_eq!(current(), NO_SPACE);
        {
            let _outer = allocate_in(Some(3));
            assert_eq!(current(), 3);
            {
                let _inner = allocate_in(None);
                assert_eq!(current(), NO_SPACE);
            }
            assert_eq!(current(), 3);
        }
        assert_eq!(current(), NO_SPACE);
        let first = thread_number();
        assert_eq!(thread_number(), first, "a thread keeps its number");
        let other = std::thread::spawn(thread_number).join().expect("thread");
        assert_ne!(other, first);
        assert_eq!(space_of_this_thread(1), 0);
    }
}
