//! The UCP context (`ucp_context_h`) and memory registered with it
//! (`ucp_mem_h`) for remote writes, with the packed key that lets a peer
//! write into it.

use std::ffi::{c_void, CString};
use std::ptr;
use std::sync::Arc;

use super::error::UcxError;
use super::ffi::{self, Ucx};

/// A UCP context: the transports and memory registrations of this process.
///
/// Created with `mt_workers_shared`, so it may be used from any thread, and
/// by workers on different threads at once. Cloning is cheap and shares the
/// context; it is cleaned up after its last clone, worker and region.
#[derive(Clone)]
pub(crate) struct Context {
    pub(super) inner: Arc<ContextInner>,
}

pub(super) struct ContextInner {
    pub(super) ucx: Arc<Ucx>,
    pub(super) handle: ffi::ucp_context_h,
}

// SAFETY: the context was created with mt_workers_shared and Context::new
// checked that UCX reports it thread-safe (UCS_THREAD_MODE_MULTI): UCX
// serializes all use of it internally. The handle is only released in Drop,
// when no other reference exists.
unsafe impl Send for ContextInner {}
// SAFETY: as for Send.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: last reference: every worker and region of this context
        // holds an Arc to it, so all of them are gone.
        unsafe { (self.ucx.ucp_cleanup)(self.handle) };
    }
}

/// Releases a `ucp_config_t` on every path out of `Context::new`.
struct Config<'a> {
    ucx: &'a Ucx,
    ptr: *mut ffi::ucp_config_t,
}

impl Drop for Config<'_> {
    fn drop(&mut self) {
        // SAFETY: ptr came from ucp_config_read and is released only here.
        unsafe { (self.ucx.ucp_config_release)(self.ptr) };
    }
}

impl Context {
    /// Creates a context with remote memory access (`UCP_FEATURE_RMA`),
    /// active messages (`UCP_FEATURE_AM`) and,
    /// if `wakeup`, wake-up events (`UCP_FEATURE_WAKEUP`: a worker can sleep
    /// on a file descriptor until something arrives,
    /// `Worker::wait_for_events`).
    ///
    /// The configuration is read from the `UCX_*` environment variables
    /// unchanged, except that `tls`, when given, replaces `UCX_TLS` (the
    /// transports, e.g. `"tcp"`) for this context only, without touching the
    /// process environment.
    pub(crate) fn new(ucx: &Arc<Ucx>, tls: Option<&str>, wakeup: bool) -> Result<Context, UcxError> {
        let mut raw_config: *mut ffi::ucp_config_t = ptr::null_mut();
        // SAFETY: NULL prefix and file name select the defaults ("UCX_", no
        // file); UCX writes the new configuration to raw_config.
        let st = unsafe { (ucx.ucp_config_read)(ptr::null(), ptr::null(), &mut raw_config) };
        ucx.check("ucp_config_read", st)?;
        let config = Config { ucx, ptr: raw_config };
        if let Some(tls) = tls {
            let value =
                CString::new(tls).map_err(|_| UcxError::Misuse("the UCX transport list contains a NUL byte"))?;
            // SAFETY: config is live; both strings are NUL-terminated and
            // only read during the call.
            let st = unsafe { (ucx.ucp_config_modify)(config.ptr, c"TLS".as_ptr(), value.as_ptr()) };
            ucx.check("ucp_config_modify(TLS)", st)?;
        }

        let params = ffi::ucp_params_t {
            field_mask: ffi::UCP_PARAM_FIELD_FEATURES
                | ffi::UCP_PARAM_FIELD_MT_WORKERS_SHARED
                | ffi::UCP_PARAM_FIELD_NAME,
            features: ffi::UCP_FEATURE_RMA | ffi::UCP_FEATURE_AM | if wakeup { ffi::UCP_FEATURE_WAKEUP } else { 0 },
            request_size: 0,
            request_init: None,
            request_cleanup: None,
            tag_sender_mask: 0,
            mt_workers_shared: 1,
            estimated_num_eps: 0,
            estimated_num_ppn: 0,
            name: c"gossamer".as_ptr(),
        };
        let mut handle: ffi::ucp_context_h = ptr::null_mut();
        // SAFETY: params and config are valid for the call (UCX copies what
        // it keeps, the name included); handle receives the new context.
        let st =
            unsafe { (ucx.ucp_init_version)(ffi::UCP_API_MAJOR, ffi::UCP_API_MINOR, &params, config.ptr, &mut handle) };
        ucx.check("ucp_init_version", st)?;
        drop(config);
        let inner = Arc::new(ContextInner { ucx: ucx.clone(), handle });

        // mt_workers_shared is a request: check that UCX granted it, since
        // Context is Sync on the strength of it.
        let mut attr = ffi::ucp_context_attr_t {
            field_mask: ffi::UCP_ATTR_FIELD_THREAD_MODE,
            request_size: 0,
            thread_mode: 0,
            memory_types: 0,
            name: [0; ffi::UCP_ENTITY_NAME_MAX],
        };
        // SAFETY: live context; UCX fills the fields named in field_mask.
        let st = unsafe { (ucx.ucp_context_query)(inner.handle, &mut attr) };
        ucx.check("ucp_context_query", st)?;
        if attr.thread_mode != ffi::UCS_THREAD_MODE_MULTI {
            return Err(UcxError::Misuse("UCX did not make the context thread-safe (mt_workers_shared was refused)"));
        }
        Ok(Context { inner })
    }

    /// The loaded library.
    pub(crate) fn ucx(&self) -> &Arc<Ucx> {
        &self.inner.ucx
    }

    /// Registers the existing memory `[base, base + len)` for remote reads
    /// and writes (`ucp_mem_map` without `UCP_MEM_MAP_ALLOCATE`).
    ///
    /// # Safety
    /// Once the region's packed key ([`MemRegion::pack_rkey`]) is handed to
    /// a peer, that peer may write any byte of the range, at any time, without
    /// this process taking part (over TCP the bytes are written while this
    /// process's workers progress; over shared memory or RDMA, whenever the
    /// peer puts). So:
    /// * the range must stay allocated and writable as long as any peer may
    ///   still put into it — dropping the [`MemRegion`] unregisters it, but
    ///   does not stop puts that are already on their way;
    /// * the memory must only be accessed in ways that tolerate such writes
    ///   (through raw pointers, atomics or volatile accesses; no `&`/`&mut`
    ///   reference to it while a peer may write).
    pub(crate) unsafe fn mem_map(&self, base: *mut u8, len: usize) -> Result<MemRegion, UcxError> {
        let ucx = &self.inner.ucx;
        let params = ffi::ucp_mem_map_params_t {
            field_mask: ffi::UCP_MEM_MAP_PARAM_FIELD_ADDRESS
                | ffi::UCP_MEM_MAP_PARAM_FIELD_LENGTH
                | ffi::UCP_MEM_MAP_PARAM_FIELD_FLAGS
                | ffi::UCP_MEM_MAP_PARAM_FIELD_PROT
                | ffi::UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
            address: base.cast::<c_void>(),
            length: len,
            flags: 0,
            prot: ffi::UCP_MEM_MAP_PROT_LOCAL_READ
                | ffi::UCP_MEM_MAP_PROT_LOCAL_WRITE
                | ffi::UCP_MEM_MAP_PROT_REMOTE_READ
                | ffi::UCP_MEM_MAP_PROT_REMOTE_WRITE,
            memory_type: ffi::UCS_MEMORY_TYPE_HOST,
        };
        let mut memh: ffi::ucp_mem_h = ptr::null_mut();
        // SAFETY: live context; params is valid for the call; registering
        // memory does not access it beyond what the caller's contract allows
        // (the range is valid memory).
        let st = unsafe { (ucx.ucp_mem_map)(self.inner.handle, &params, &mut memh) };
        ucx.check("ucp_mem_map", st)?;
        Ok(MemRegion { ctx: self.inner.clone(), memh, base, len })
    }
}

/// Memory registered with a [`Context`] for remote writes; unregistered
/// (`ucp_mem_unmap`) on drop. See [`Context::mem_map`].
pub(crate) struct MemRegion {
    ctx: Arc<ContextInner>,
    memh: ffi::ucp_mem_h,
    base: *mut u8,
    len: usize,
}

// SAFETY: the memory handle belongs to a thread-safe context (see
// ContextInner); the base pointer is only reported, never dereferenced here.
unsafe impl Send for MemRegion {}
// SAFETY: as for Send.
unsafe impl Sync for MemRegion {}

impl MemRegion {
    /// The region's address, as a peer names it in a put.
    pub(crate) fn base(&self) -> u64 {
        self.base as u64
    }

    /// The region's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The region's remote key, packed for a peer (`ucp_rkey_pack`); the
    /// peer unpacks it with [`Endpoint::unpack_rkey`](super::Endpoint::unpack_rkey),
    /// together with [`base`](Self::base) and [`len`](Self::len).
    pub(crate) fn pack_rkey(&self) -> Result<Vec<u8>, UcxError> {
        let ucx = &self.ctx.ucx;
        let mut buf: *mut c_void = ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: live context and memory handle; UCX allocates the buffer.
        let st = unsafe { (ucx.ucp_rkey_pack)(self.ctx.handle, self.memh, &mut buf, &mut size) };
        ucx.check("ucp_rkey_pack", st)?;
        // SAFETY: UCX returned a buffer of `size` bytes, valid until released.
        let packed = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size) }.to_vec();
        // SAFETY: the buffer came from ucp_rkey_pack and is released once.
        unsafe { (ucx.ucp_rkey_buffer_release)(buf) };
        Ok(packed)
    }
}

impl Drop for MemRegion {
    fn drop(&mut self) {
        let ucx = &self.ctx.ucx;
        // SAFETY: the handle came from ucp_mem_map on this (still live)
        // context and is unmapped once.
        let st = unsafe { (ucx.ucp_mem_unmap)(self.ctx.handle, self.memh) };
        if let Err(e) = ucx.check("ucp_mem_unmap", st) {
            tracing::warn!("{e}");
        }
    }
}

impl std::fmt::Debug for MemRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MemRegion({:#x}, {} bytes)", self.base(), self.len)
    }
}
