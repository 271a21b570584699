//! Out-of-line values (Wu et al. §4.1): a long text or bytes value kept in its own
//! reference-counted allocation, which the packed row points at through a descriptor.
//!
//! Definitions: a *descriptor* is the [`DESCRIPTOR_BYTES`] a packed row stores in its
//! variable bytes in place of an out-of-line value's data: the address and the length of
//! an `Arc<[u8]>`.
//!
//! Invariant (kept by `row.rs`, the only user): every descriptor in the bytes of a live
//! `PackedRow` or `InPlaceRow`, under an out-of-line tag, owns exactly one strong count of
//! its `Arc`. A row that copies a descriptor takes a count ([`share`]); a row that drops or
//! overwrites one gives it back ([`release`]). The data is never written after the `Arc`
//! is made, so any number of rows, and readers borrowing them, may read it at once.
//!
//! This module is where the engine's `unsafe` for out-of-line values lives; each block is
//! listed with its invariant in `docs/unsafe.md`.

#![allow(unsafe_code)]

use std::sync::Arc;

/// Bytes a descriptor takes in a packed row: the data's address, then its length.
pub(super) const DESCRIPTOR_BYTES: usize = 16;

/// Moves `data` into a new out-of-line allocation; the returned descriptor owns its one
/// strong count.
pub(super) fn store(data: &[u8]) -> [u8; DESCRIPTOR_BYTES] {
    let value: Arc<[u8]> = Arc::from(data);
    let len = value.len();
    // `into_raw` hands the count over to the descriptor; `expose_provenance` lets
    // `with_exposed_provenance` give the address its provenance back when it is read.
    let address = Arc::into_raw(value).cast::<u8>().expose_provenance();
    let mut descriptor = [0u8; DESCRIPTOR_BYTES];
    descriptor[..8].copy_from_slice(&(address as u64).to_ne_bytes());
    descriptor[8..].copy_from_slice(&(len as u64).to_ne_bytes());
    descriptor
}

/// The `Arc<[u8]>` pointer a descriptor holds.
fn pointer(descriptor: &[u8]) -> *const [u8] {
    debug_assert_eq!(descriptor.len(), DESCRIPTOR_BYTES);
    let word = |at: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&descriptor[at..at + 8]);
        u64::from_ne_bytes(bytes) as usize
    };
    let data = std::ptr::with_exposed_provenance::<u8>(word(0));
    std::ptr::slice_from_raw_parts(data, word(8))
}

/// The data a descriptor points at, for as long as the descriptor is borrowed.
///
/// # Safety
/// `descriptor` lies in the bytes of a live row under an out-of-line tag (so it owns a
/// strong count, per the module invariant), and the row stays borrowed for as long as
/// `descriptor` is (the data's lifetime): the count cannot be given back while the data is
/// read.
pub(super) unsafe fn data(descriptor: &[u8]) -> &[u8] {
    // SAFETY: by the caller's promise the descriptor owns a strong count of an
    // `Arc<[u8]>` made by `store`, held while the descriptor is borrowed; an `Arc`'s data is valid, initialized
    // and never written while a count exists, and `pointer` rebuilds the exact address and
    // length `into_raw` gave.
    unsafe { &*pointer(descriptor) }
}

/// Takes one more strong count for a copy of `descriptor` (which a new row now holds).
///
/// # Safety
/// `descriptor` owns a strong count (module invariant) that stays held for the duration of
/// the call.
pub(super) unsafe fn share(descriptor: &[u8]) {
    // SAFETY: the pointer came from `Arc::<[u8]>::into_raw` and its `Arc` is alive (the
    // caller holds a count), which is all `increment_strong_count` requires.
    unsafe { Arc::increment_strong_count(pointer(descriptor)) }
}

/// Gives back the strong count `descriptor` owns; the last one frees the data.
///
/// # Safety
/// `descriptor` owns a strong count (module invariant), and the row it lies in no longer
/// treats it as owning one after this call (it is dropped, or overwritten at once).
pub(super) unsafe fn release(descriptor: &[u8]) {
    // SAFETY: the pointer came from `Arc::<[u8]>::into_raw`, and the count this
    // descriptor owns is given back exactly once (the caller's promise).
    drop(unsafe { Arc::from_raw(pointer(descriptor)) })
}

/// The strong count of the value a descriptor points at (tests check sharing with it).
///
/// # Safety
/// As for [`share`].
#[cfg(test)]
pub(super) unsafe fn strong_count(descriptor: &[u8]) -> usize {
    // SAFETY: as in `share`: the descriptor owns a count, so its `Arc` is alive; the
    // `ManuallyDrop` keeps this function from giving the count back.
    let value = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(pointer(descriptor)) });
    Arc::strong_count(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_keeps_its_value_until_every_count_is_released() {
        let descriptor = store(b"non-inline value");
        // SAFETY: `descriptor` owns the count `store` made until the last `release`.
        unsafe {
            assert_eq!(data(&descriptor), b"non-inline value");
            assert_eq!(strong_count(&descriptor), 1);
            share(&descriptor);
            assert_eq!(strong_count(&descriptor), 2);
            release(&descriptor);
            assert_eq!(strong_count(&descriptor), 1);
            assert_eq!(data(&descriptor), b"non-inline value");
            release(&descriptor);
        }
    }
}
