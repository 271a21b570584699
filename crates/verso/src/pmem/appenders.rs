//! Each thread's appending state of each store of a region (its [`super::LineWriter`], the
//! block or frame it appends to), kept in a thread-local cache so that writers never share
//! one, and taken back when the thread ends or the store goes.
//!
//! Definitions: a *store* is a storage's state beside its rows (the tile-block storage's
//! `TileStore`, the append-nvm storage's `NvmStore`), told apart by an id unique in the
//! process; its *appender* is whatever one thread needs to store into the region. Each
//! appender lives in a *slot* that both the thread's cache and the store's [`Registry`]
//! reach.
//!
//! Invariants:
//! - A thread has at most one appender per store, and only that thread uses it (its slot's
//!   lock is uncontended but when the thread ends or the store goes).
//! - Nothing here holds a store: an appender reaches only what it hands back when it
//!   retires (through `Arc`s of its own), so no thread's cache keeps a store, and with it
//!   the database directory's lock, alive after the database's last handle went
//!   (`regression_the_directory_is_free_as_soon_as_the_last_handle_goes`).
//! - An appender retires exactly once: when its thread ends (the thread-local cache's
//!   destructor), or when its store goes ([`Registry::retire_all`]), whichever comes first,
//!   under its slot's lock; after the store went, every appender (and the region its writer
//!   holds) is gone.

use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// A new store's id, unique in the process among the stores of every storage (a thread's
/// cache tells stores apart by it: `regression_stores_of_both_region_storages_have_distinct_ids`).
pub(crate) fn new_store_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A thread's appender of a store.
pub(crate) trait ThreadAppender: Any + Send {
    /// The thread ends or the store goes: persist what it stored and hand back what it
    /// holds (an open block, a frame) for other threads.
    fn retire(&mut self);

    /// Itself, to be downcast to its store's type.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

type Slot = Arc<Mutex<Option<Box<dyn ThreadAppender>>>>;

fn lock<T: ?Sized>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A store's appenders, on every thread that made one.
#[derive(Default)]
pub(crate) struct Registry(Mutex<Vec<Slot>>);

impl Registry {
    /// The store goes: every appender still in a slot retires now (a thread that is
    /// retiring its own is waited for), so that no writer of the region is left.
    pub(crate) fn retire_all(&self) {
        for slot in std::mem::take(&mut *lock(&self.0)) {
            if let Some(mut appender) = lock(&slot).take() {
                appender.retire();
            }
        }
    }
}

struct Cached {
    store: u64,
    slot: Slot,
}

struct ThreadAppenders(Vec<Cached>);

impl Drop for ThreadAppenders {
    /// The thread ends: each appender not retired by its store retires.
    fn drop(&mut self) {
        for cached in self.0.drain(..) {
            if let Some(mut appender) = lock(&cached.slot).take() {
                appender.retire();
            }
        }
    }
}

thread_local! {
    static APPENDERS: RefCell<ThreadAppenders> = const { RefCell::new(ThreadAppenders(Vec::new())) };
}

/// Runs `f` with this thread's appender of the store `id` (whose appenders `registry`
/// lists), made by `make` on first use. While the thread's locals are being destroyed (a
/// transaction dropped by another local's destructor), a passing appender is made and
/// retired after `f`.
pub(crate) fn with_thread_appender<A: ThreadAppender, R>(
    id: u64,
    registry: &Registry,
    make: impl FnOnce() -> A,
    f: impl FnOnce(&mut A) -> R,
) -> R {
    let mut make = Some(make);
    let mut f = Some(f);
    let cached = APPENDERS.try_with(|cache| {
        // Borrowed until `f` returns: `f` never appends through another appender of this
        // thread (a nested call panics on the borrow rather than deadlocking on a slot).
        let mut cache = cache.borrow_mut();
        let i = match cache.0.iter().position(|cached| cached.store == id) {
            Some(i) => i,
            None => {
                // Entries of stores that went (their slots emptied) are dropped first.
                cache.0.retain(|cached| lock(&cached.slot).is_some());
                let appender: Box<dyn ThreadAppender> =
                    Box::new((make.take().expect("made once"))());
                let slot: Slot = Arc::new(Mutex::new(Some(appender)));
                lock(&registry.0).push(Arc::clone(&slot));
                cache.0.push(Cached { store: id, slot });
                cache.0.len() - 1
            }
        };
        let mut appender = lock(&cache.0[i].slot);
        let appender = appender
            .as_mut()
            .expect("a live store's appender is in its slot")
            .as_any_mut()
            .downcast_mut::<A>()
            .expect("a store makes appenders of one type");
        (f.take().expect("called once"))(appender)
    });
    match cached {
        Ok(result) => result,
        Err(_) => {
            let mut appender = (make.take().expect("not made"))();
            let result = (f.take().expect("not called"))(&mut appender);
            appender.retire();
            result
        }
    }
}
