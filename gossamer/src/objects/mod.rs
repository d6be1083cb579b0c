//! Building blocks for whole programs, composed from trusts alone (no
//! locks, no atomic read-modify-write on their fast paths), that work
//! unchanged within one process and across the processes of a rack:
//!
//! * [`spawn_to`] / [`spawn_to_with`]: start a fiber on the trustee thread
//!   of a trust, so its `apply` calls take the local shortcut (DRust's
//!   data-affine spawn);
//! * [`Barrier`]: a reusable barrier over any set of threads of the
//!   program, with LOCO's transitive semantics;
//! * [`channel`], [`mpmc_channel`]: bounded channels whose ends travel to
//!   any thread of any process, where `recv` suspends only the fiber;
//! * [`ring`]: a broadcast ring, one writer and many readers, each message
//!   read once by every reader, with back-pressure;
//! * [`Shared`]: a large read-only value published once, read without
//!   copying in its process and replicated once per process elsewhere.
//!
//! Every waiting fiber waits on a property of its own thread (see `bell`):
//! whoever releases it sends an ordinary delegated closure to that
//! property, which makes the fiber ready again. So waiting never blocks an
//! OS thread, and the wake-up crosses processes like any other request.
//!
//! Fate sharing is the rack's: if a process of the program dies, every
//! process stops and the launcher exits non-zero, so no fiber is left
//! waiting for a participant that is gone.

mod barrier;
mod bell;
mod channel;
mod ring;
mod shared;
mod spawn_to;

pub use barrier::Barrier;
pub use channel::{
    channel, channel_on, mpmc_channel, mpmc_channel_on, MultiReceiver, Receiver, RecvError, SendError, Sender,
    TryRecvError,
};
pub use ring::{ring, RingReader, RingWriter};
pub use shared::Shared;
pub use spawn_to::spawn_to;
#[allow(deprecated)]
pub use spawn_to::spawn_to_with;
