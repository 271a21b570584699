//! The transaction manager: the commit clock, per-thread slots, and the state word every
//! writing transaction shares with readers of its versions.

pub(crate) mod identity_set;
pub(crate) mod slots;
pub(crate) mod state;
