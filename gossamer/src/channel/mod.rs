//! The delegation channel: fixed slots between every pair of threads, the
//! layout of requests and responses inside them, and the client-side queues
//! that feed them, how values are framed for another process, and the
//! host's shared heap, whose buffers (`SharedBytes`) cross between the
//! processes of a host by reference. This is where all of the crate's
//! lock-free, single-writer shared-memory code lives.

pub(crate) mod byte_queue;
pub(crate) mod heap;
pub(crate) mod hooks;
pub(crate) mod image;
pub(crate) mod large;
pub(crate) mod matrix;
pub(crate) mod record;
pub(crate) mod remote;
#[allow(dead_code)] // used by the fabric between hosts
pub(crate) mod remote_slot;
pub(crate) mod slot;
pub(crate) mod transfer;
pub(crate) mod word_queue;
