//! Software prefetch: asking the processor for a cache line before it is needed, so that
//! the misses of several independent lookups overlap instead of following one another
//! (`Transaction::prefetch`).
//!
//! Its `unsafe` is listed in `docs/unsafe.md`: the prefetch intrinsic is an `unsafe fn` only
//! because it takes a raw pointer, and a prefetch never dereferences it.

/// Asks for the cache line holding `address` (and nothing else happens): a hint with no
/// effect on what the program computes. `address` may be stale, dangling or unmapped.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn prefetch_address(address: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which is part of every x86_64 target's baseline;
    // PREFETCHT0 has no architectural effect: it reads nothing the program observes, never
    // faults (not even on an unmapped or freed address), and writes nothing.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address; // no stable prefetch elsewhere: the hint does nothing
}

/// Asks for the first two cache lines of `value` (for a row: its reference counts, latch
/// and chain head, and the start of its values).
#[inline(always)]
pub(crate) fn prefetch_object<T: ?Sized>(value: &T) {
    prefetch_object_at(std::ptr::from_ref(value).cast::<u8>() as usize);
}

/// [`prefetch_object`] for an object known only by its address, which may be stale.
#[inline(always)]
pub(crate) fn prefetch_object_at(address: usize) {
    prefetch_address(address);
    prefetch_address(address.wrapping_add(64));
}

/// Asks for the cache line of the reference counts of the `Arc` whose value is at
/// `value_address` (`Arc::as_ptr`; the counts sit just before the value): for a foreseen
/// drop of an `Arc` whose counts are probably cold.
#[inline(always)]
pub(crate) fn prefetch_arc_counts(value_address: usize) {
    prefetch_address(value_address.wrapping_sub(2 * std::mem::size_of::<usize>()));
}
