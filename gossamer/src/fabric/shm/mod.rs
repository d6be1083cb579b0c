//! Within a host: the region that the host's processes share (slots,
//! doorbells, bulk areas, the slots between hosts, and the memory of the
//! host's shared heap), and the POSIX shared memory it lives in. Writing a
//! slot of another process of the host is a plain store into the mapping;
//! nothing else moves the bytes.

pub(crate) mod map;
pub(crate) mod region;
