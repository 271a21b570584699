//! The synchronization primitives of the version chain, the transaction state and the
//! collectors' epoch managers, swapped
//! for loom's under `--cfg loom` so the loom tests can explore their interleavings.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

/// A sequentially consistent fence, for the store-then-load (Dekker) patterns of the epoch
/// collectors: their SeqCst accesses already order them in the C11 model, but loom models
/// SeqCst accesses as acquire/release only and checks the pattern through the fence.
pub(crate) fn fence_seq_cst() {
    #[cfg(not(loom))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    #[cfg(loom)]
    loom::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// A fence of the given ordering (loom's under `--cfg loom`), for the seqlocks of the
/// statistics (`stats.rs`).
pub(crate) fn fence(ordering: std::sync::atomic::Ordering) {
    #[cfg(not(loom))]
    std::sync::atomic::fence(ordering);
    #[cfg(loom)]
    loom::sync::atomic::fence(ordering);
}

/// Gives up the processor while waiting for another thread's few instructions.
pub(crate) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// A row's reader-writer latch. `T` may be unsized (a row whose values tail is sized when
/// the row is created): build the latch over a sized value and coerce the `Arc` holding it.
#[cfg(not(loom))]
pub(crate) struct Latch<T: ?Sized>(parking_lot::RwLock<T>);
#[cfg(not(loom))]
pub(crate) type ReadGuard<'a, T> = parking_lot::RwLockReadGuard<'a, T>;
#[cfg(not(loom))]
pub(crate) type WriteGuard<'a, T> = parking_lot::RwLockWriteGuard<'a, T>;

#[cfg(not(loom))]
impl<T> Latch<T> {
    pub(crate) fn new(value: T) -> Self {
        Latch(parking_lot::RwLock::new(value))
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> Latch<T> {
    pub(crate) fn read(&self) -> ReadGuard<'_, T> {
        self.0.read()
    }

    pub(crate) fn write(&self) -> WriteGuard<'_, T> {
        self.0.write()
    }

    pub(crate) fn try_write(&self) -> Option<WriteGuard<'_, T>> {
        self.0.try_write()
    }

    pub(crate) fn try_read(&self) -> Option<ReadGuard<'_, T>> {
        self.0.try_read()
    }
}

/// A mutual-exclusion lock (the buffer pool's page table), loom's under `--cfg loom`.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

#[cfg(not(loom))]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(parking_lot::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
        self.0.lock()
    }

    /// The lock if it is free now, without waiting.
    pub(crate) fn try_lock(&self) -> Option<parking_lot::MutexGuard<'_, T>> {
        self.0.try_lock()
    }
}

/// A mutual-exclusion lock, loom's.
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        // A panic while locked aborts the test anyway; poisoning carries no information.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lock if it is free now, without waiting.
    pub(crate) fn try_lock(&self) -> Option<loom::sync::MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// A row's reader-writer latch. loom's lock holds only sized values, so an unsized one is
/// boxed (built with [`Latch::from_box`]); the guards see through the box.
#[cfg(loom)]
pub(crate) struct Latch<T: ?Sized>(loom::sync::RwLock<Box<T>>);

#[cfg(loom)]
pub(crate) struct ReadGuard<'a, T: ?Sized>(loom::sync::RwLockReadGuard<'a, Box<T>>);

#[cfg(loom)]
pub(crate) struct WriteGuard<'a, T: ?Sized>(loom::sync::RwLockWriteGuard<'a, Box<T>>);

#[cfg(loom)]
impl<T: ?Sized> std::ops::Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(loom)]
impl<T: ?Sized> std::ops::Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(loom)]
impl<T: ?Sized> std::ops::DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

#[cfg(loom)]
impl<T> Latch<T> {
    #[allow(dead_code)] // the rows are built with `from_box`
    pub(crate) fn new(value: T) -> Self {
        Self::from_box(Box::new(value))
    }
}

#[cfg(loom)]
impl<T: ?Sized> Latch<T> {
    pub(crate) fn from_box(value: Box<T>) -> Self {
        Latch(loom::sync::RwLock::new(value))
    }

    pub(crate) fn read(&self) -> ReadGuard<'_, T> {
        // A panic while latched aborts the test anyway; poisoning carries no information.
        ReadGuard(self.0.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn write(&self) -> WriteGuard<'_, T> {
        WriteGuard(self.0.write().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn try_write(&self) -> Option<WriteGuard<'_, T>> {
        self.0.try_write().ok().map(WriteGuard)
    }

    pub(crate) fn try_read(&self) -> Option<ReadGuard<'_, T>> {
        self.0.try_read().ok().map(ReadGuard)
    }
}
