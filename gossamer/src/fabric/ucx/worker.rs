//! The UCP worker (`ucp_worker_h`): progress, fence and flush, endpoint
//! creation, the requests of operations in flight ([`Request`], [`Put`]),
//! and the cleanup of endpoints and keys dropped away from their worker.

use std::cell::RefCell;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::context::{Context, ContextInner};
use super::endpoint::{self, EpState};
use super::error::UcxError;
use super::ffi::{self, Ucx};
use super::Endpoint;

/// How long [`Worker::flush`] and [`Endpoint::flush`] wait.
pub(crate) const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long closing an endpoint, or dropping a worker with endpoints still
/// closing, waits for the peer.
pub(crate) const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long dropping an unfinished [`Put`] waits before it force-closes the
/// endpoint.
pub(crate) const PUT_DROP_TIMEOUT: Duration = Duration::from_secs(2);

/// A UCP worker: the progress engine of one thread.
///
/// `Send` but not `Sync`: only one thread at a time may use it (it may move
/// between threads). The UCX worker is created in
/// `UCS_THREAD_MODE_SERIALIZED`, the mode for exactly that: UCX takes no
/// locks, but does not assume the worker stays on the thread that created it.
///
/// Nothing happens on the network unless [`progress`](Self::progress) is
/// called; over TCP that includes puts *into* this process's memory.
pub(crate) struct Worker {
    pub(super) shared: Arc<WorkerShared>,
    /// Close requests of endpoints still in flight (`ucp_ep_close_nbx`).
    closing: RefCell<Vec<*mut c_void>>,
}

/// What a worker shares with its endpoints and keys.
pub(super) struct WorkerShared {
    pub(super) ucx: Arc<Ucx>,
    /// Keeps the context alive until the worker is destroyed.
    ctx: Arc<ContextInner>,
    /// Used only by the holder of `&Worker` (see Worker's docs), or with
    /// exclusive access in Drop.
    pub(super) handle: ffi::ucp_worker_h,
    /// Set when `deferred` is not empty; read on every progress.
    has_deferred: AtomicBool,
    deferred: Mutex<Vec<Deferred>>,
    /// The error-callback state of every endpoint ever created on this
    /// worker: UCX holds a pointer to it until the worker is destroyed.
    ep_states: Mutex<Vec<Arc<EpState>>>,
    /// The active-message handlers set on this worker: UCX holds a pointer
    /// to each until the worker is destroyed. Boxed twice: UCX keeps a thin
    /// pointer, which must not move when the vector grows.
    #[allow(clippy::vec_box)]
    am_handlers: Mutex<Vec<Box<AmHandler>>>,
}

/// What [`Worker::set_am_handler`] calls with each active message: its
/// header, and its data (`None` if it came by rendezvous, which is not
/// taken: senders here send eagerly).
pub(crate) type AmHandler = Box<dyn FnMut(&[u8], Option<&[u8]>) + Send>;

/// The callback UCX calls for an active message: hands it to the
/// [`AmHandler`] at `arg`. Never unwinds into UCX.
unsafe extern "C" fn am_trampoline(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const ffi::ucp_am_recv_param_t,
) -> ffi::RawStatus {
    // SAFETY: UCX passes the parameters of this message, valid for the call.
    let rndv = !param.is_null() && unsafe { (*param).recv_attr } & ffi::UCP_AM_RECV_ATTR_FLAG_RNDV != 0;
    let bytes = |p: *const c_void, len: usize| -> &[u8] {
        if p.is_null() || len == 0 {
            &[]
        } else {
            // SAFETY: UCX hands `len` readable bytes at `p` for the call
            // (the header, and the data of an eager message).
            unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
        }
    };
    let (header, data) = (bytes(header, header_length), if rndv { None } else { Some(bytes(data, length)) });
    // SAFETY: `arg` is the handler boxed by `set_am_handler`, which lives
    // as long as the worker; UCX calls back only from a progress of the
    // worker, which one thread at a time makes (`&Worker`), so this is the
    // only reference to it.
    let handler = unsafe { &mut *arg.cast::<AmHandler>() };
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(header, data))).is_err() {
        tracing::error!("an active-message handler panicked; the message was dropped");
    }
    ffi::UCS_OK as ffi::RawStatus
}

/// Work for the worker's thread, left by a handle dropped elsewhere.
pub(super) enum Deferred {
    DestroyRkey(ffi::ucp_rkey_h),
    CloseEp { ep: ffi::ucp_ep_h, force: bool },
}

// SAFETY: the worker handle is only passed to UCX by the one thread that
// holds `&Worker` (Worker is not Sync), or in Drop with exclusive access; the
// other fields are thread-safe (Mutex, atomics, Arc of Send + Sync types).
unsafe impl Send for WorkerShared {}
// SAFETY: as for Send.
unsafe impl Sync for WorkerShared {}

// SAFETY: the raw pointers in `closing` are UCX requests of this worker,
// which are only touched together with the worker, by the thread holding it.
// Worker stays !Sync through the RefCell.
unsafe impl Send for Worker {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WorkerShared {
    pub(super) fn defer(&self, work: Deferred) {
        lock(&self.deferred).push(work);
        self.has_deferred.store(true, Ordering::Release);
    }

    pub(super) fn register(&self, state: Arc<EpState>) {
        lock(&self.ep_states).push(state);
    }

    /// Runs the deferred work; close requests still in flight are returned.
    ///
    /// # Safety
    /// Only on the worker's thread (holding `&Worker`) or with exclusive
    /// access.
    unsafe fn run_deferred(&self) -> Vec<*mut c_void> {
        self.has_deferred.store(false, Ordering::Relaxed);
        let mut work = std::mem::take(&mut *lock(&self.deferred));
        // Keys before endpoints.
        work.sort_by_key(|w| matches!(w, Deferred::CloseEp { .. }));
        let mut in_flight = Vec::new();
        for w in work {
            match w {
                // SAFETY: the key came from ucp_ep_rkey_unpack on this worker
                // and its RemoteKey is gone, so no operation uses it.
                Deferred::DestroyRkey(rkey) => unsafe { (self.ucx.ucp_rkey_destroy)(rkey) },
                Deferred::CloseEp { ep, force } => {
                    // SAFETY: the endpoint belongs to this worker and its
                    // Endpoint is gone; it is closed once.
                    match unsafe { endpoint::start_close(&self.ucx, ep, force) } {
                        Ok(Some(req)) => in_flight.push(req),
                        Ok(None) => {}
                        Err(e) => tracing::debug!("closing a dropped UCX endpoint: {e}"),
                    }
                }
            }
        }
        in_flight
    }
}

impl Drop for WorkerShared {
    fn drop(&mut self) {
        // SAFETY: exclusive access: the Worker and every handle of this
        // worker are gone.
        for req in unsafe { self.run_deferred() } {
            // SAFETY: an in-flight close request of this worker; UCX allows
            // releasing it before it completes.
            unsafe { (self.ucx.ucp_request_free)(req) };
        }
        // SAFETY: exclusive access, and no endpoint, key or request of this
        // worker is left with us; UCX destroys what remains of the
        // endpoints being closed.
        unsafe { (self.ucx.ucp_worker_destroy)(self.handle) };
        // The fields go after this: the error-callback states (ep_states)
        // only now that UCX can no longer call back, the context last.
    }
}

impl Worker {
    /// Creates a worker on `ctx`.
    pub(crate) fn new(ctx: &Context) -> Result<Worker, UcxError> {
        let ucx = ctx.ucx().clone();
        let params = ffi::ucp_worker_params_t {
            field_mask: ffi::UCP_WORKER_PARAM_FIELD_THREAD_MODE,
            thread_mode: ffi::UCS_THREAD_MODE_SERIALIZED,
            cpu_mask: ffi::ucs_cpu_set_t { ucs_bits: [0; ffi::UCS_CPU_SET_WORDS] },
            events: 0,
            user_data: ptr::null_mut(),
            event_fd: 0,
            flags: 0,
            name: ptr::null(),
            am_alignment: 0,
            client_id: 0,
        };
        let mut handle: ffi::ucp_worker_h = ptr::null_mut();
        // SAFETY: live, thread-safe context; params valid for the call.
        let st = unsafe { (ucx.ucp_worker_create)(ctx.inner.handle, &params, &mut handle) };
        ucx.check("ucp_worker_create", st)?;
        Ok(Worker {
            shared: Arc::new(WorkerShared {
                ucx,
                ctx: ctx.inner.clone(),
                handle,
                has_deferred: AtomicBool::new(false),
                deferred: Mutex::new(Vec::new()),
                ep_states: Mutex::new(Vec::new()),
                am_handlers: Mutex::new(Vec::new()),
            }),
            closing: RefCell::new(Vec::new()),
        })
    }

    pub(super) fn ucx(&self) -> &Ucx {
        &self.shared.ucx
    }

    /// Whether `shared` is this worker's.
    pub(super) fn owns(&self, shared: &Arc<WorkerShared>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }

    /// This worker's address, for a peer's [`connect`](Self::connect)
    /// (`ucp_worker_get_address`).
    pub(crate) fn address(&self) -> Result<Vec<u8>, UcxError> {
        let ucx = self.ucx();
        let mut addr: *mut ffi::ucp_address_t = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: live worker, used by this thread only (&self, !Sync).
        let st = unsafe { (ucx.ucp_worker_get_address)(self.shared.handle, &mut addr, &mut len) };
        ucx.check("ucp_worker_get_address", st)?;
        // SAFETY: UCX returned `len` readable bytes at addr.
        let bytes = unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), len) }.to_vec();
        // SAFETY: released once, on the worker it came from.
        unsafe { (ucx.ucp_worker_release_address)(self.shared.handle, addr) };
        Ok(bytes)
    }

    /// Sleeps until something may have arrived for this worker, or `timeout`
    /// passes, through UCX's wake-up file descriptor (`ucp_worker_arm`,
    /// then `poll` on `ucp_worker_get_efd`'s descriptor). Returns at once
    /// when events are already pending (the caller should progress them).
    /// `Err` when the transports in use give no descriptor: the caller
    /// falls back to polling with pauses.
    ///
    /// Call it only after [`progress`](Self::progress) returned 0: events
    /// UCX already holds do not wake the descriptor.
    pub(crate) fn wait_for_events(&self, timeout: Duration) -> Result<(), UcxError> {
        let ucx = self.ucx();
        let mut fd: std::ffi::c_int = -1;
        // SAFETY: live worker, used by this thread only (&self, !Sync); UCX
        // writes the descriptor, which stays owned by the worker.
        let st = unsafe { (ucx.ucp_worker_get_efd)(self.shared.handle, &mut fd) };
        ucx.check("ucp_worker_get_efd", st)?;
        // SAFETY: as above.
        let st = unsafe { (ucx.ucp_worker_arm)(self.shared.handle) };
        if ffi::status_of(st) == ffi::UCS_ERR_BUSY {
            return Ok(()); // events are pending: progress them first
        }
        ucx.check("ucp_worker_arm", st)?;
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the call; the descriptor is the
        // worker's, open while the worker lives. EINTR or a timeout simply
        // return: the caller progresses and waits again.
        unsafe { libc::poll(&mut pfd, 1, ms) };
        Ok(())
    }

    /// Drives communication (`ucp_worker_progress`); returns the number of
    /// events UCX processed. Also finishes the cleanup of endpoints and keys
    /// that were dropped.
    pub(crate) fn progress(&self) -> u32 {
        // SAFETY: live worker, used by this thread only.
        let n = unsafe { (self.ucx().ucp_worker_progress)(self.shared.handle) };
        if self.shared.has_deferred.load(Ordering::Acquire) {
            // SAFETY: we hold &Worker.
            let started = unsafe { self.shared.run_deferred() };
            self.closing.borrow_mut().extend(started);
        }
        if !self.closing.borrow().is_empty() {
            self.reap_closing();
        }
        n
    }

    /// Takes over a close request in flight, to be released when complete.
    pub(super) fn adopt_close(&self, req: *mut c_void) {
        self.closing.borrow_mut().push(req);
    }

    /// Frees the close requests that completed.
    fn reap_closing(&self) {
        let ucx = self.ucx();
        self.closing.borrow_mut().retain(|&req| {
            // SAFETY: an unreleased request of this worker.
            let st = ffi::status_of(unsafe { (ucx.ucp_request_check_status)(req) });
            if st == ffi::UCS_INPROGRESS {
                return true;
            }
            if st != ffi::UCS_OK {
                tracing::debug!("closing a UCX endpoint: {}", ucx.status_text(st));
            }
            // SAFETY: completed; released once.
            unsafe { (ucx.ucp_request_free)(req) };
            false
        });
    }

    /// Endpoint closes not yet finished, dropped endpoints included. An
    /// orderly shutdown progresses until this is zero.
    pub(crate) fn pending_closes(&self) -> usize {
        let deferred = lock(&self.shared.deferred).iter().filter(|w| matches!(w, Deferred::CloseEp { .. })).count();
        self.closing.borrow().len() + deferred
    }

    /// Calls `handler` with every active message `id` that arrives for
    /// this worker, whole, from within [`progress`](Self::progress)
    /// (`ucp_worker_set_am_recv_handler`). A later handler for the same
    /// `id` replaces this one.
    pub(crate) fn set_am_handler(
        &self,
        id: u32,
        handler: impl FnMut(&[u8], Option<&[u8]>) + Send + 'static,
    ) -> Result<(), UcxError> {
        let mut boxed: Box<AmHandler> = Box::new(Box::new(handler));
        let params = ffi::ucp_am_handler_param_t {
            field_mask: ffi::UCP_AM_HANDLER_PARAM_FIELD_ID
                | ffi::UCP_AM_HANDLER_PARAM_FIELD_FLAGS
                | ffi::UCP_AM_HANDLER_PARAM_FIELD_CB
                | ffi::UCP_AM_HANDLER_PARAM_FIELD_ARG,
            id,
            flags: ffi::UCP_AM_FLAG_WHOLE_MSG,
            cb: Some(am_trampoline),
            arg: (&mut *boxed as *mut AmHandler).cast::<c_void>(),
        };
        // SAFETY: live worker, used by this thread only; the handler's box
        // is kept (below) until the worker is destroyed, and its heap
        // address does not change when the box moves.
        let st = unsafe { (self.ucx().ucp_worker_set_am_recv_handler)(self.shared.handle, &params) };
        self.ucx().check("ucp_worker_set_am_recv_handler", st)?;
        lock(&self.shared.am_handlers).push(boxed);
        Ok(())
    }

    /// Orders this worker's puts: those issued after the fence are written
    /// at their targets after those issued before (`ucp_worker_fence`).
    pub(crate) fn fence(&self) -> Result<(), UcxError> {
        // SAFETY: live worker, used by this thread only.
        let st = unsafe { (self.ucx().ucp_worker_fence)(self.shared.handle) };
        self.ucx().check("ucp_worker_fence", st)
    }

    /// Starts a flush of every operation of this worker (`ucp_worker_flush_nbx`):
    /// when the request is done, all puts issued before it are complete at
    /// their targets. The targets must progress meanwhile.
    pub(crate) fn flush_nb(&self) -> Result<Request<'_>, UcxError> {
        let param = ffi::ucp_request_param_t::with_flags(0, 0);
        // SAFETY: live worker, used by this thread only; param valid for the call.
        let p = unsafe { (self.ucx().ucp_worker_flush_nbx)(self.shared.handle, &param) };
        Request::from_status_ptr(self, p, "ucp_worker_flush_nbx", None)
    }

    /// Flushes this worker (see [`flush_nb`](Self::flush_nb)), progressing it
    /// until done; gives up after [`FLUSH_TIMEOUT`]. Only this worker is
    /// progressed: the targets must progress on their own threads.
    pub(crate) fn flush(&self) -> Result<(), UcxError> {
        let req = self.flush_nb()?;
        self.wait(req, FLUSH_TIMEOUT)
    }

    /// Connects to the worker whose [`address`](Self::address) is
    /// `remote_address` (`ucp_ep_create`, error handling mode PEER).
    ///
    /// The address must come from an authenticated peer: UCX parses it
    /// without a length.
    pub(crate) fn connect(&self, remote_address: &[u8]) -> Result<Endpoint, UcxError> {
        endpoint::connect(self, remote_address)
    }

    /// Whether `req` is complete (`ucp_request_check_status`). A complete
    /// request is released at once; an error of the operation is returned
    /// (once). Does not progress.
    pub(crate) fn is_done(&self, req: &mut Request<'_>) -> Result<bool, UcxError> {
        if !ptr::eq(req.worker, self) {
            return Err(UcxError::Misuse("UCX request checked on a worker it does not belong to"));
        }
        req.check()
    }

    /// Progresses this worker until `req` is done, for at most `timeout`.
    /// On timeout the request is dropped (see [`Request`]).
    pub(crate) fn wait(&self, mut req: Request<'_>, timeout: Duration) -> Result<(), UcxError> {
        let start = Instant::now();
        loop {
            if self.is_done(&mut req)? {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(UcxError::Timeout { what: req.what, after: timeout });
            }
            if self.progress() == 0 {
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Close what was dropped, giving the peers a bounded time to answer.
        self.progress();
        let start = Instant::now();
        while !self.closing.borrow().is_empty() && start.elapsed() < CLOSE_TIMEOUT {
            if self.progress() == 0 {
                std::thread::yield_now();
            }
        }
        for req in self.closing.get_mut().drain(..) {
            // SAFETY: an in-flight close request of this worker; releasing
            // it early is allowed, and the worker is destroyed later.
            unsafe { (self.shared.ucx.ucp_request_free)(req) };
        }
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Worker({:p})", self.shared.handle)
    }
}

/// An operation of a [`Worker`]: complete, or in flight (a UCX request).
///
/// While in flight, it borrows everything the operation uses (the worker,
/// for a put also the endpoint, the key and the source bytes), so none of
/// them can change or go away. Check it with [`Worker::is_done`] while
/// progressing (the target's worker too), or wait with [`Worker::wait`].
///
/// Dropped while in flight, it progresses its worker until the operation
/// completes, for at most [`PUT_DROP_TIMEOUT`]; if a put still has not
/// completed then, its endpoint is force-closed (which cancels the put, so
/// the source is never read afterwards; [`Endpoint::failed`] then says so).
pub(crate) struct Request<'a> {
    worker: &'a Worker,
    /// The UCX request; null once complete and released.
    req: *mut c_void,
    what: &'static str,
    /// The endpoint of a put.
    ep: Option<&'a Endpoint>,
    _borrows: PhantomData<&'a [u8]>,
}

/// A put in flight or complete: a [`Request`] of
/// [`Endpoint::put`]. Its completion is local completion: the source may be
/// reused; visibility at the target needs a flush.
pub(crate) type Put<'a> = Request<'a>;

impl<'a> Request<'a> {
    /// Wraps what a `*_nbx` call returned: NULL (done), an error, or a
    /// request.
    pub(super) fn from_status_ptr(
        worker: &'a Worker,
        p: ffi::ucs_status_ptr_t,
        what: &'static str,
        ep: Option<&'a Endpoint>,
    ) -> Result<Request<'a>, UcxError> {
        if ffi::ptr_is_err(p) {
            return Err(worker.ucx().error(what, ffi::ptr_status(p)));
        }
        Ok(Request { worker, req: p, what, ep, _borrows: PhantomData })
    }

    /// A request that completed at once.
    pub(super) fn done(worker: &'a Worker, what: &'static str) -> Request<'a> {
        Request { worker, req: ptr::null_mut(), what, ep: None, _borrows: PhantomData }
    }

    /// Whether it is known to be complete, without asking UCX (true when it
    /// completed at once, or a check found it complete).
    pub(crate) fn is_complete(&self) -> bool {
        self.req.is_null()
    }

    fn check(&mut self) -> Result<bool, UcxError> {
        if self.req.is_null() {
            return Ok(true);
        }
        let ucx = self.worker.ucx();
        // SAFETY: an unreleased request of our worker, on its thread.
        let st = ffi::status_of(unsafe { (ucx.ucp_request_check_status)(self.req) });
        if st == ffi::UCS_INPROGRESS {
            return Ok(false);
        }
        // SAFETY: complete; released once (req is cleared).
        unsafe { (ucx.ucp_request_free)(self.req) };
        self.req = ptr::null_mut();
        match st {
            ffi::UCS_OK => Ok(true),
            st => Err(ucx.error(self.what, st)),
        }
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if self.req.is_null() {
            return;
        }
        let start = Instant::now();
        // Only a put reads memory of ours; anything else is simply released.
        while self.ep.is_some() {
            match self.check() {
                Ok(true) | Err(_) => return,
                Ok(false) => {}
            }
            if start.elapsed() > PUT_DROP_TIMEOUT {
                if let Some(ep) = self.ep {
                    ep.abandon(self.worker);
                }
                break;
            }
            if self.worker.progress() == 0 {
                std::thread::yield_now();
            }
        }
        // SAFETY: an unreleased request of our worker. UCX allows releasing
        // an unfinished request; a put's endpoint was force-closed above,
        // which cancels the put, so the source is not read any more.
        unsafe { (self.worker.ucx().ucp_request_free)(self.req) };
    }
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if self.req.is_null() { "complete" } else { "in flight" };
        write!(f, "Request({}, {state})", self.what)
    }
}
