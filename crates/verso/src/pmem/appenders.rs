//! Each thread's appending state of each store of a region (its [`super::LineWriter`], the
//! block or frame it appends to), kept in a thread-local cache so that writers never share
//! one, and handed back to its store when the thread ends.
//!
//! Definitions: a *store* is a storage's state beside its rows (the tile-block storage's
//! `TileStore`, the append-nvm storage's `NvmStore`), told apart by an id unique in the
//! process; its *appender* is whatever one thread needs to store into the region.
//!
//! Invariants:
//! - A thread has at most one appender per store, and only that thread uses it (no lock).
//! - An appender whose thread ends, or that was made for one call because the thread's
//!   locals were being destroyed, goes back to its store through [`Retire::retire`] if the
//!   store still lives (its open frames must not be lost, and what its writer stored but
//!   did not persist must be persisted before another thread appends after it).
//! - A store forgets this thread's appender when it is dropped ([`forget`]): an appender
//!   holds the region (its writer), and the region must go with the store.

use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// A store that takes back the appenders of threads that end.
pub(crate) trait Retire: Send + Sync + 'static {
    /// `appender` (made by the store for a thread, of the type it made) is done with.
    fn retire(&self, appender: Box<dyn Any>);
}

struct Cached {
    store: u64,
    owner: Weak<dyn Retire>,
    appender: Box<dyn Any>,
}

struct ThreadAppenders(Vec<Cached>);

impl Drop for ThreadAppenders {
    /// The thread ends: each store that lives on gets its appender back.
    fn drop(&mut self) {
        for cached in self.0.drain(..) {
            if let Some(owner) = cached.owner.upgrade() {
                owner.retire(cached.appender);
            }
        }
    }
}

thread_local! {
    static APPENDERS: RefCell<ThreadAppenders> = const { RefCell::new(ThreadAppenders(Vec::new())) };
}

/// Runs `f` with this thread's appender of `store` (whose id is `id`), made by `make` on
/// first use. While the thread's locals are being destroyed (a transaction dropped by
/// another local's destructor), a passing appender is made and retired after `f`.
pub(crate) fn with_thread_appender<S: Retire, A: 'static, R>(
    store: &Arc<S>,
    id: u64,
    make: impl FnOnce() -> A,
    f: impl FnOnce(&mut A) -> R,
) -> R {
    let mut make = Some(make);
    let mut f = Some(f);
    let cached = APPENDERS.try_with(|cache| {
        let mut cache = cache.borrow_mut();
        cache.0.retain(|cached| cached.owner.strong_count() > 0);
        let i = match cache.0.iter().position(|cached| cached.store == id) {
            Some(i) => i,
            None => {
                let appender = (make.take().expect("made once"))();
                let owner: Weak<dyn Retire> = Arc::downgrade(store) as Weak<dyn Retire>;
                cache.0.push(Cached {
                    store: id,
                    owner,
                    appender: Box::new(appender),
                });
                cache.0.len() - 1
            }
        };
        let appender = cache.0[i]
            .appender
            .downcast_mut::<A>()
            .expect("a store makes appenders of one type");
        (f.take().expect("called once"))(appender)
    });
    match cached {
        Ok(result) => result,
        Err(_) => {
            let mut appender = (make.take().expect("not made"))();
            let result = (f.take().expect("not called"))(&mut appender);
            store.retire(Box::new(appender));
            result
        }
    }
}

/// Drops this thread's appender of the store `id`, if it has one (the store is being
/// dropped; another thread's goes when that thread ends or next appends to any store).
pub(crate) fn forget(id: u64) {
    let _ = APPENDERS.try_with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            cache.0.retain(|cached| cached.store != id);
        }
    });
}
