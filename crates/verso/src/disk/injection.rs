//! A test's hook into an interleaving: a closure set once and run once by the code path
//! that reaches the point (`HeapFile::inject_before_hints`,
//! `BufferPool::inject_after_counting_a_block`), so an integration test can make another
//! thread act at exactly that moment. One atomic load on the path when nothing is set.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::sync::Mutex;

/// A hook run once at one point of a code path, if a test set it.
pub(crate) struct Injection {
    set: AtomicBool,
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for Injection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Injection")
    }
}

// By hand: under loom, `crate::sync::Mutex` has no `Default`.
impl Default for Injection {
    fn default() -> Self {
        Injection {
            set: AtomicBool::new(false),
            hook: Mutex::new(None),
        }
    }
}

impl Injection {
    /// Sets the hook the next [`Injection::run`] runs.
    pub(crate) fn set(&self, hook: Box<dyn FnOnce() + Send>) {
        *self.hook.lock() = Some(hook);
        self.set.store(true, Ordering::Release);
    }

    /// Runs the hook, if one is set, once.
    pub(crate) fn run(&self) {
        if self.set.load(Ordering::Acquire) {
            let hook = self.hook.lock().take();
            if let Some(hook) = hook {
                hook();
            }
        }
    }
}
