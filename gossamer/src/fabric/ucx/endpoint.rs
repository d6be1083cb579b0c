//! Endpoints (`ucp_ep_h`) to remote workers, with their error state, the
//! remote keys unpacked on them (`ucp_rkey_h`), and puts (`ucp_put_nbx`).

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI8, AtomicPtr, Ordering};
use std::sync::Arc;

use super::error::UcxError;
use super::ffi::{self, Ucx};
use super::worker::{Deferred, Put, Request, Worker, WorkerShared, CLOSE_TIMEOUT, FLUSH_TIMEOUT};

/// How far UCX 1.13 may read into a packed remote key, which it parses
/// without a length: a 64-bit MD map, a memory-type byte, then for each of
/// at most 64 MDs a size byte and up to 255 bytes.
const RKEY_READ_BOUND: usize = 8 + 1 + 64 * (1 + 255);

/// An endpoint's error state, written by UCX's error callback.
pub(super) struct EpState {
    ucx: Arc<Ucx>,
    /// The first error status reported, 0 while none.
    status: AtomicI8,
    /// Force-closed because a put was dropped unfinished.
    abandoned: AtomicBool,
}

/// `ucp_err_handler_cb_t`: records the first failure of the endpoint. Runs
/// inside `ucp_worker_progress` of the endpoint's worker; only stores.
unsafe extern "C" fn on_ep_error(arg: *mut c_void, _ep: ffi::ucp_ep_h, status: ffi::RawStatus) {
    // SAFETY: arg is the EpState registered with the endpoint; its worker
    // keeps it alive (WorkerShared::ep_states) until after the UCX worker is
    // destroyed, so it outlives every callback.
    let state = unsafe { &*arg.cast_const().cast::<EpState>() };
    let status = match ffi::status_of(status) {
        ffi::UCS_OK => ffi::UCS_ERR_IO_ERROR,
        s => s,
    };
    if state.status.load(Ordering::Relaxed) == ffi::UCS_OK {
        state.status.store(status, Ordering::Release);
    }
}

/// A connection from a [`Worker`] to a remote worker (`ucp_ep_h`), with
/// error handling mode PEER: a lost peer fails its operations and is
/// reported by [`failed`](Self::failed) instead of aborting the process.
///
/// Its operations take the worker it was created on (anything else is an
/// error). It may be kept and dropped anywhere: dropped, it is closed by the
/// worker's next progress (`ucp_ep_close_nbx`, flushing first unless it
/// failed); [`close`](Self::close) closes it at once.
pub(crate) struct Endpoint {
    shared: Arc<WorkerShared>,
    /// Null once closed.
    handle: AtomicPtr<ffi::ucp_ep>,
    state: Arc<EpState>,
}

// SAFETY: the endpoint handle is only passed to UCX by the thread holding
// `&Worker` of its worker (every operation checks it), or handed to that
// worker's deferred work on drop; the rest is thread-safe.
unsafe impl Send for Endpoint {}
// SAFETY: as for Send.
unsafe impl Sync for Endpoint {}

pub(super) fn connect(worker: &Worker, remote_address: &[u8]) -> Result<Endpoint, UcxError> {
    if remote_address.is_empty() {
        return Err(UcxError::Misuse("empty UCX worker address"));
    }
    let ucx = worker.ucx();
    let state = Arc::new(EpState {
        ucx: worker.shared.ucx.clone(),
        status: AtomicI8::new(ffi::UCS_OK),
        abandoned: AtomicBool::new(false),
    });
    worker.shared.register(state.clone());
    let params = ffi::ucp_ep_params_t {
        field_mask: ffi::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
            | ffi::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
            | ffi::UCP_EP_PARAM_FIELD_ERR_HANDLER,
        address: remote_address.as_ptr().cast::<ffi::ucp_address_t>(),
        err_mode: ffi::UCP_ERR_HANDLING_MODE_PEER,
        err_handler: ffi::ucp_err_handler_t {
            cb: Some(on_ep_error),
            arg: Arc::as_ptr(&state).cast_mut().cast::<c_void>(),
        },
        user_data: ptr::null_mut(),
        flags: 0,
        sockaddr: ffi::ucs_sock_addr_t { addr: ptr::null(), addrlen: 0 },
        conn_request: ptr::null_mut(),
        name: ptr::null(),
        local_sockaddr: ffi::ucs_sock_addr_t { addr: ptr::null(), addrlen: 0 },
    };
    let mut ep: ffi::ucp_ep_h = ptr::null_mut();
    // SAFETY: live worker on this thread; the address is read during the
    // call only; the callback argument outlives the endpoint (see
    // on_ep_error).
    let st = unsafe { (ucx.ucp_ep_create)(worker.shared.handle, &params, &mut ep) };
    ucx.check("ucp_ep_create", st)?;
    Ok(Endpoint { shared: worker.shared.clone(), handle: AtomicPtr::new(ep), state })
}

/// Starts closing `ep` (`ucp_ep_close_nbx`, FORCE or flushing first);
/// returns the request if it did not complete at once.
///
/// # Safety
/// `ep` is a live endpoint, closed only here, on its worker's thread.
pub(super) unsafe fn start_close(ucx: &Ucx, ep: ffi::ucp_ep_h, force: bool) -> Result<Option<*mut c_void>, UcxError> {
    let param = if force {
        ffi::ucp_request_param_t::with_flags(ffi::UCP_OP_ATTR_FIELD_FLAGS, ffi::UCP_EP_CLOSE_FLAG_FORCE)
    } else {
        ffi::ucp_request_param_t::with_flags(0, 0)
    };
    // SAFETY: per the caller's contract; param valid for the call.
    let p = unsafe { (ucx.ucp_ep_close_nbx)(ep, &param) };
    if ffi::ptr_is_err(p) {
        Err(ucx.error("ucp_ep_close_nbx", ffi::ptr_status(p)))
    } else if p.is_null() {
        Ok(None)
    } else {
        Ok(Some(p))
    }
}

impl Endpoint {
    /// The live handle, for an operation by `worker`.
    fn live(&self, worker: &Worker) -> Result<ffi::ucp_ep_h, UcxError> {
        if !worker.owns(&self.shared) {
            return Err(UcxError::Misuse("UCX endpoint used with a worker it does not belong to"));
        }
        if let Some(why) = self.failed() {
            return Err(UcxError::EndpointFailed(why));
        }
        let ep = self.handle.load(Ordering::Acquire);
        if ep.is_null() {
            return Err(UcxError::EndpointFailed("closed".into()));
        }
        Ok(ep)
    }

    /// Why the endpoint can no longer be used, if it cannot: the error UCX
    /// reported for it (a lost or reset peer), or its forced close.
    pub(crate) fn failed(&self) -> Option<String> {
        let st = self.state.status.load(Ordering::Acquire);
        if st != ffi::UCS_OK {
            return Some(format!("{} (ucs_status_t {st})", self.state.ucx.status_text(st)));
        }
        if self.state.abandoned.load(Ordering::Acquire) {
            return Some("force-closed because a put was dropped before it completed".into());
        }
        None
    }

    /// Unpacks a peer's packed key ([`MemRegion::pack_rkey`](super::MemRegion::pack_rkey))
    /// for puts through this endpoint (`ucp_ep_rkey_unpack`), together with
    /// the bounds of the region it was packed for: puts outside
    /// `[remote_base, remote_base + remote_len)` are refused.
    ///
    /// The key must come from an authenticated peer: UCX parses it without a
    /// length (a short key cannot make it read past our copy, but a forged
    /// one is not detected).
    pub(crate) fn unpack_rkey(
        &self,
        worker: &Worker,
        packed: &[u8],
        remote_base: u64,
        remote_len: usize,
    ) -> Result<RemoteKey, UcxError> {
        let ep = self.live(worker)?;
        if packed.is_empty() {
            return Err(UcxError::Misuse("empty packed UCX remote key"));
        }
        if remote_base.checked_add(remote_len as u64).is_none() {
            return Err(UcxError::Misuse("remote region wraps around the address space"));
        }
        let mut buf = packed.to_vec();
        if buf.len() < RKEY_READ_BOUND {
            buf.resize(RKEY_READ_BOUND, 0);
        }
        let ucx = worker.ucx();
        let mut rkey: ffi::ucp_rkey_h = ptr::null_mut();
        // SAFETY: live endpoint on its worker's thread; buf holds at least
        // as many bytes as UCX can read (RKEY_READ_BOUND).
        let st = unsafe { (ucx.ucp_ep_rkey_unpack)(ep, buf.as_ptr().cast::<c_void>(), &mut rkey) };
        ucx.check("ucp_ep_rkey_unpack", st)?;
        Ok(RemoteKey { shared: self.shared.clone(), rkey, ep: self.state.clone(), base: remote_base, len: remote_len })
    }

    /// Writes `src` to `remote_addr` of the peer's region opened by `rkey`
    /// (`ucp_put_nbx`).
    ///
    /// The [`Put`] borrows `src` (and the endpoint, key and worker) until it
    /// completes: UCX may read `src` until then. Completion is local: the
    /// bytes reach the target's memory when the target progresses, and are
    /// known to be there once a flush completes.
    pub(crate) fn put<'a>(
        &'a self,
        worker: &'a Worker,
        src: &'a [u8],
        remote_addr: u64,
        rkey: &'a RemoteKey,
    ) -> Result<Put<'a>, UcxError> {
        let ep = self.live(worker)?;
        if !Arc::ptr_eq(&rkey.ep, &self.state) {
            return Err(UcxError::Misuse("UCX remote key used on an endpoint it was not unpacked on"));
        }
        let in_range = remote_addr >= rkey.base
            && (remote_addr - rkey.base).checked_add(src.len() as u64).is_some_and(|end| end <= rkey.len as u64);
        if !in_range {
            return Err(UcxError::OutOfRange {
                addr: remote_addr,
                len: src.len(),
                base: rkey.base,
                region_len: rkey.len,
            });
        }
        if src.is_empty() {
            return Ok(Request::done(worker, "ucp_put_nbx"));
        }
        let param = ffi::ucp_request_param_t::with_flags(0, 0);
        // SAFETY: live endpoint and key of this worker, on its thread; the
        // returned Put borrows src, the key and the endpoint until UCX is
        // done with them; the range was checked against the region the peer
        // registered for remote writes.
        let p = unsafe {
            (worker.ucx().ucp_put_nbx)(ep, src.as_ptr().cast::<c_void>(), src.len(), remote_addr, rkey.rkey, &param)
        };
        Request::from_status_ptr(worker, p, "ucp_put_nbx", Some(self))
    }

    /// Sends active message `id` (`ucp_am_send_nbx`, eager only): `header`,
    /// then the bytes of `parts` in order as its data. The target's handler
    /// for `id` (see [`Worker::set_am_handler`]) gets the whole message in
    /// one call, when the target progresses.
    ///
    /// The [`Request`] borrows the header and the parts (and the endpoint
    /// and worker) until it completes: UCX may read them until then.
    /// Completion is local: the bytes may be reused.
    pub(crate) fn am_send<'a>(
        &'a self,
        worker: &'a Worker,
        id: u32,
        header: &'a [u8],
        parts: &'a [IoPart<'a>],
    ) -> Result<Request<'a>, UcxError> {
        let ep = self.live(worker)?;
        let mut param = ffi::ucp_request_param_t::with_flags(
            ffi::UCP_OP_ATTR_FIELD_FLAGS | ffi::UCP_OP_ATTR_FIELD_DATATYPE,
            ffi::UCP_AM_SEND_FLAG_EAGER,
        );
        param.datatype = ffi::UCP_DATATYPE_IOV;
        // SAFETY: live endpoint of this worker, on its thread; `IoPart` is a
        // transparent `ucp_dt_iov_t` naming bytes borrowed for 'a, and the
        // returned request borrows the header and the parts until UCX is
        // done with them.
        let p = unsafe {
            (worker.ucx().ucp_am_send_nbx)(
                ep,
                id,
                header.as_ptr().cast::<c_void>(),
                header.len(),
                parts.as_ptr().cast::<c_void>(),
                parts.len(),
                &param,
            )
        };
        Request::from_status_ptr(worker, p, "ucp_am_send_nbx", Some(self))
    }

    /// Starts a flush of this endpoint (`ucp_ep_flush_nbx`): when done, all
    /// puts issued on it before are complete at the target.
    pub(crate) fn flush_nb<'a>(&'a self, worker: &'a Worker) -> Result<Request<'a>, UcxError> {
        let ep = self.live(worker)?;
        let param = ffi::ucp_request_param_t::with_flags(0, 0);
        // SAFETY: live endpoint on its worker's thread; param valid for the call.
        let p = unsafe { (worker.ucx().ucp_ep_flush_nbx)(ep, &param) };
        Request::from_status_ptr(worker, p, "ucp_ep_flush_nbx", None)
    }

    /// Flushes this endpoint (see [`flush_nb`](Self::flush_nb)),
    /// progressing `worker` until done; gives up after [`FLUSH_TIMEOUT`].
    /// The target must progress on its own thread meanwhile.
    pub(crate) fn flush(&self, worker: &Worker) -> Result<(), UcxError> {
        let req = self.flush_nb(worker)?;
        worker.wait(req, FLUSH_TIMEOUT)
    }

    /// Closes the endpoint now (`ucp_ep_close_nbx`: flushing first, or
    /// FORCE if it failed), progressing `worker` for at most
    /// [`CLOSE_TIMEOUT`]. The peer must progress meanwhile for a flushing
    /// close to finish.
    pub(crate) fn close(self, worker: &Worker) -> Result<(), UcxError> {
        if !worker.owns(&self.shared) {
            return Err(UcxError::Misuse("UCX endpoint closed with a worker it does not belong to"));
        }
        let ep = self.handle.swap(ptr::null_mut(), Ordering::AcqRel);
        if ep.is_null() {
            return Ok(());
        }
        let force = self.failed().is_some();
        // SAFETY: live endpoint of this worker, on its thread; the handle was
        // taken, so it is closed once.
        let Some(req) = (unsafe { start_close(worker.ucx(), ep, force) })? else {
            return Ok(());
        };
        worker.wait(Request::from_status_ptr(worker, req, "ucp_ep_close_nbx", None)?, CLOSE_TIMEOUT)
    }

    /// Force-closes the endpoint because a put on it is being dropped
    /// unfinished: UCX cancels its outstanding operations.
    pub(super) fn abandon(&self, worker: &Worker) {
        let ep = self.handle.swap(ptr::null_mut(), Ordering::AcqRel);
        if ep.is_null() {
            return;
        }
        self.state.abandoned.store(true, Ordering::Release);
        tracing::warn!("a UCX put was dropped before it completed: force-closing its endpoint");
        // SAFETY: live endpoint of this worker (the Put that calls this holds
        // &Worker), taken from the handle, so closed once.
        match unsafe { start_close(worker.ucx(), ep, true) } {
            Ok(Some(req)) => worker.adopt_close(req),
            Ok(None) => {}
            Err(e) => tracing::debug!("force-closing a UCX endpoint: {e}"),
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let ep = *self.handle.get_mut();
        if !ep.is_null() {
            self.shared.defer(Deferred::CloseEp { ep, force: self.failed().is_some() });
        }
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint({:p}, failed: {:?})", self.handle.load(Ordering::Relaxed), self.failed())
    }
}

/// A peer's remote key unpacked on an [`Endpoint`] (`ucp_rkey_h`), with the
/// bounds of the remote region it opens. Destroyed (`ucp_rkey_destroy`) by
/// its worker's next progress after it is dropped.
pub(crate) struct RemoteKey {
    shared: Arc<WorkerShared>,
    rkey: ffi::ucp_rkey_h,
    /// The endpoint it was unpacked on.
    ep: Arc<EpState>,
    base: u64,
    len: usize,
}

// SAFETY: the key handle is only passed to UCX by the thread holding
// `&Worker` of its worker (through Endpoint::put, which checks the
// endpoint), or handed to that worker's deferred work on drop.
unsafe impl Send for RemoteKey {}
// SAFETY: as for Send.
unsafe impl Sync for RemoteKey {}

impl RemoteKey {
    /// Base address of the remote region.
    pub(crate) fn base(&self) -> u64 {
        self.base
    }

    /// Length of the remote region.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for RemoteKey {
    fn drop(&mut self) {
        self.shared.defer(Deferred::DestroyRkey(self.rkey));
    }
}

impl std::fmt::Debug for RemoteKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteKey({:#x}, {} bytes)", self.base, self.len)
    }
}

/// Bytes that an active message carries ([`Endpoint::am_send`]): one
/// element of a UCX scatter-gather list, borrowing its bytes.
#[repr(transparent)]
pub(crate) struct IoPart<'a>(ffi::ucp_dt_iov_t, PhantomData<&'a [u8]>);

impl<'a> IoPart<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> IoPart<'a> {
        IoPart(
            ffi::ucp_dt_iov_t { buffer: bytes.as_ptr().cast_mut().cast::<c_void>(), length: bytes.len() },
            PhantomData,
        )
    }
}
