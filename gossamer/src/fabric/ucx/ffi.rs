//! Raw declarations of the part of UCP (UCX 1.13) that the fabric uses, and
//! the table of its functions, resolved by name from `libucp.so.0` at run
//! time.
//!
//! Everything here mirrors `/usr/include/ucp/api/ucp.h`, `ucp_def.h` and
//! `/usr/include/ucs/type/*.h` of UCX 1.13 on x86_64/aarch64 Linux (LP64):
//! the struct layouts and constants are checked against the installed
//! headers by the layout test (`layout_test.rs`). Names keep their C
//! spelling so that they can be looked up in the headers.
//!
//! `ucs_status_t` is a packed (one-byte, signed) enum. In the fields of a
//! struct it is [`ucs_status_t`] (`i8`). As a return value or callback
//! argument it travels in a register whose upper bits the C side does not
//! define, so the function table declares it as [`RawStatus`] (`c_int`) and
//! [`status_of`] keeps only the low byte.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CStr};
use std::marker::{PhantomData, PhantomPinned};
use std::mem::ManuallyDrop;

use libloading::Library;

use super::error::UcxError;

/// The library the table is loaded from.
pub(crate) const LIBUCP: &str = "libucp.so.0";

/// The UCP API version this module is written against (`ucp_init_version`).
pub(crate) const UCP_API_MAJOR: c_uint = 1;
pub(crate) const UCP_API_MINOR: c_uint = 13;

macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        /// An opaque UCX object; only ever handled by pointer.
        #[repr(C)]
        pub(crate) struct $name {
            _data: [u8; 0],
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}

opaque!(ucp_context, ucp_config_t, ucp_worker, ucp_ep, ucp_address_t, ucp_mem, ucp_rkey);

pub(crate) type ucp_context_h = *mut ucp_context;
pub(crate) type ucp_worker_h = *mut ucp_worker;
pub(crate) type ucp_ep_h = *mut ucp_ep;
pub(crate) type ucp_mem_h = *mut ucp_mem;
pub(crate) type ucp_rkey_h = *mut ucp_rkey;

/// `ucs_status_t` as stored in memory: one signed byte.
pub(crate) type ucs_status_t = i8;
/// `ucs_status_t` as returned by a function or passed to a callback (see the
/// module documentation); read it with [`status_of`].
pub(crate) type RawStatus = c_int;
/// `ucs_status_ptr_t`: a request pointer, `NULL` for done, or an error status.
pub(crate) type ucs_status_ptr_t = *mut c_void;

/// `ucs_thread_mode_t` (a plain C enum).
pub(crate) type ucs_thread_mode_t = c_uint;
/// `ucs_memory_type_t` (a plain C enum).
pub(crate) type ucs_memory_type_t = c_uint;
/// `ucp_err_handling_mode_t` (a plain C enum).
pub(crate) type ucp_err_handling_mode_t = c_uint;
/// `ucp_datatype_t`.
pub(crate) type ucp_datatype_t = u64;

/// The low byte of a returned status (see the module documentation).
#[inline]
pub(crate) fn status_of(raw: RawStatus) -> ucs_status_t {
    raw as ucs_status_t
}

// ucs/type/status.h
pub(crate) const UCS_OK: ucs_status_t = 0;
pub(crate) const UCS_INPROGRESS: ucs_status_t = 1;
pub(crate) const UCS_ERR_NO_MESSAGE: ucs_status_t = -1;
pub(crate) const UCS_ERR_IO_ERROR: ucs_status_t = -3;
pub(crate) const UCS_ERR_BUSY: ucs_status_t = -15;
pub(crate) const UCS_ERR_INVALID_PARAM: ucs_status_t = -5;
pub(crate) const UCS_ERR_UNREACHABLE: ucs_status_t = -6;
pub(crate) const UCS_ERR_CANCELED: ucs_status_t = -16;
pub(crate) const UCS_ERR_TIMED_OUT: ucs_status_t = -20;
pub(crate) const UCS_ERR_CONNECTION_RESET: ucs_status_t = -25;
pub(crate) const UCS_ERR_ENDPOINT_TIMEOUT: ucs_status_t = -80;
pub(crate) const UCS_ERR_LAST: ucs_status_t = -100;

/// `UCS_PTR_IS_ERR`: the pointer carries an error status, i.e. as a signed
/// number it lies in `[UCS_ERR_LAST, -1]`.
#[inline]
pub(crate) fn ptr_is_err(p: ucs_status_ptr_t) -> bool {
    (p as usize) >= (UCS_ERR_LAST as isize as usize)
}

/// `UCS_PTR_RAW_STATUS`: the status inside an error pointer.
#[inline]
pub(crate) fn ptr_status(p: ucs_status_ptr_t) -> ucs_status_t {
    p as isize as ucs_status_t
}

// ucs/type/thread_mode.h
pub(crate) const UCS_THREAD_MODE_SINGLE: ucs_thread_mode_t = 0;
pub(crate) const UCS_THREAD_MODE_SERIALIZED: ucs_thread_mode_t = 1;
pub(crate) const UCS_THREAD_MODE_MULTI: ucs_thread_mode_t = 2;

// ucs/memory/memory_type.h
pub(crate) const UCS_MEMORY_TYPE_HOST: ucs_memory_type_t = 0;

// enum ucp_params_field
pub(crate) const UCP_PARAM_FIELD_FEATURES: u64 = 1 << 0;
pub(crate) const UCP_PARAM_FIELD_MT_WORKERS_SHARED: u64 = 1 << 5;
pub(crate) const UCP_PARAM_FIELD_NAME: u64 = 1 << 8;

// enum ucp_feature
pub(crate) const UCP_FEATURE_RMA: u64 = 1 << 1;
pub(crate) const UCP_FEATURE_WAKEUP: u64 = 1 << 4;
pub(crate) const UCP_FEATURE_AM: u64 = 1 << 6;

// enum ucp_am_cb_flags
pub(crate) const UCP_AM_FLAG_WHOLE_MSG: u32 = 1 << 0;
// enum ucp_send_am_flags
pub(crate) const UCP_AM_SEND_FLAG_EAGER: u32 = 1 << 1;
// enum ucp_am_recv_attr_t
pub(crate) const UCP_AM_RECV_ATTR_FLAG_RNDV: u64 = 1 << 17;
// enum ucp_am_handler_param_field
pub(crate) const UCP_AM_HANDLER_PARAM_FIELD_ID: u64 = 1 << 0;
pub(crate) const UCP_AM_HANDLER_PARAM_FIELD_FLAGS: u64 = 1 << 1;
pub(crate) const UCP_AM_HANDLER_PARAM_FIELD_CB: u64 = 1 << 2;
pub(crate) const UCP_AM_HANDLER_PARAM_FIELD_ARG: u64 = 1 << 3;
// enum ucp_dt_type
pub(crate) const UCP_DATATYPE_IOV: ucp_datatype_t = 2;

// enum ucp_context_attr_field
pub(crate) const UCP_ATTR_FIELD_THREAD_MODE: u64 = 1 << 1;

// enum ucp_worker_params_field
pub(crate) const UCP_WORKER_PARAM_FIELD_THREAD_MODE: u64 = 1 << 0;

// enum ucp_ep_params_field
pub(crate) const UCP_EP_PARAM_FIELD_REMOTE_ADDRESS: u64 = 1 << 0;
pub(crate) const UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE: u64 = 1 << 1;
pub(crate) const UCP_EP_PARAM_FIELD_ERR_HANDLER: u64 = 1 << 2;

// ucp_err_handling_mode_t
pub(crate) const UCP_ERR_HANDLING_MODE_PEER: ucp_err_handling_mode_t = 1;

// ucp_ep_close_flags_t
pub(crate) const UCP_EP_CLOSE_FLAG_FORCE: u32 = 1 << 0;

// enum ucp_mem_map_params_field
pub(crate) const UCP_MEM_MAP_PARAM_FIELD_ADDRESS: u64 = 1 << 0;
pub(crate) const UCP_MEM_MAP_PARAM_FIELD_LENGTH: u64 = 1 << 1;
pub(crate) const UCP_MEM_MAP_PARAM_FIELD_FLAGS: u64 = 1 << 2;
pub(crate) const UCP_MEM_MAP_PARAM_FIELD_PROT: u64 = 1 << 3;
pub(crate) const UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE: u64 = 1 << 4;

// memory protection of ucp_mem_map
pub(crate) const UCP_MEM_MAP_PROT_LOCAL_READ: c_uint = 1 << 0;
pub(crate) const UCP_MEM_MAP_PROT_LOCAL_WRITE: c_uint = 1 << 1;
pub(crate) const UCP_MEM_MAP_PROT_REMOTE_READ: c_uint = 1 << 8;
pub(crate) const UCP_MEM_MAP_PROT_REMOTE_WRITE: c_uint = 1 << 9;

// ucp_op_attr_t
pub(crate) const UCP_OP_ATTR_FIELD_DATATYPE: u32 = 1 << 3;
pub(crate) const UCP_OP_ATTR_FIELD_FLAGS: u32 = 1 << 4;

/// `UCP_ENTITY_NAME_MAX`.
pub(crate) const UCP_ENTITY_NAME_MAX: usize = 32;
/// `UCS_CPU_SETSIZE / (8 * sizeof(unsigned long))`.
pub(crate) const UCS_CPU_SET_WORDS: usize = 1024 / (8 * std::mem::size_of::<c_ulong>());

/// `ucp_request_init_callback_t` / `ucp_request_cleanup_callback_t`.
pub(crate) type ucp_request_callback_t = Option<unsafe extern "C" fn(request: *mut c_void)>;
/// `ucp_err_handler_cb_t` (the status argument as [`RawStatus`]).
pub(crate) type ucp_err_handler_cb_t = Option<unsafe extern "C" fn(arg: *mut c_void, ep: ucp_ep_h, status: RawStatus)>;
/// `ucp_send_nbx_callback_t`, standing for the whole callback union of
/// `ucp_request_param_t` (all its members are function pointers).
pub(crate) type ucp_send_nbx_callback_t =
    Option<unsafe extern "C" fn(request: *mut c_void, status: RawStatus, user_data: *mut c_void)>;

/// `ucp_am_recv_callback_t` (the returned status as [`RawStatus`]).
pub(crate) type ucp_am_recv_callback_t = Option<
    unsafe extern "C" fn(
        arg: *mut c_void,
        header: *const c_void,
        header_length: usize,
        data: *mut c_void,
        length: usize,
        param: *const ucp_am_recv_param_t,
    ) -> RawStatus,
>;

/// `ucp_am_handler_param_t`.
#[repr(C)]
pub(crate) struct ucp_am_handler_param_t {
    pub field_mask: u64,
    pub id: c_uint,
    pub flags: u32,
    pub cb: ucp_am_recv_callback_t,
    pub arg: *mut c_void,
}

/// `ucp_am_recv_param_t`.
#[repr(C)]
pub(crate) struct ucp_am_recv_param_t {
    pub recv_attr: u64,
    pub reply_ep: ucp_ep_h,
}

/// `ucp_dt_iov_t`.
#[repr(C)]
pub(crate) struct ucp_dt_iov_t {
    pub buffer: *mut c_void,
    pub length: usize,
}

/// `ucp_params_t`.
#[repr(C)]
pub(crate) struct ucp_params_t {
    pub field_mask: u64,
    pub features: u64,
    pub request_size: usize,
    pub request_init: ucp_request_callback_t,
    pub request_cleanup: ucp_request_callback_t,
    pub tag_sender_mask: u64,
    pub mt_workers_shared: c_int,
    pub estimated_num_eps: usize,
    pub estimated_num_ppn: usize,
    pub name: *const c_char,
}

/// `ucp_context_attr_t`.
#[repr(C)]
pub(crate) struct ucp_context_attr_t {
    pub field_mask: u64,
    pub request_size: usize,
    pub thread_mode: ucs_thread_mode_t,
    pub memory_types: u64,
    pub name: [c_char; UCP_ENTITY_NAME_MAX],
}

/// `ucs_cpu_set_t`.
#[repr(C)]
pub(crate) struct ucs_cpu_set_t {
    pub ucs_bits: [c_ulong; UCS_CPU_SET_WORDS],
}

/// `ucp_worker_params_t`.
#[repr(C)]
pub(crate) struct ucp_worker_params_t {
    pub field_mask: u64,
    pub thread_mode: ucs_thread_mode_t,
    pub cpu_mask: ucs_cpu_set_t,
    pub events: c_uint,
    pub user_data: *mut c_void,
    pub event_fd: c_int,
    pub flags: u64,
    pub name: *const c_char,
    pub am_alignment: usize,
    pub client_id: u64,
}

/// `ucp_err_handler_t`.
#[repr(C)]
pub(crate) struct ucp_err_handler_t {
    pub cb: ucp_err_handler_cb_t,
    pub arg: *mut c_void,
}

/// `ucs_sock_addr_t` (`addr` is a `const struct sockaddr *`).
#[repr(C)]
pub(crate) struct ucs_sock_addr_t {
    pub addr: *const c_void,
    pub addrlen: u32,
}

/// `ucp_ep_params_t`.
#[repr(C)]
pub(crate) struct ucp_ep_params_t {
    pub field_mask: u64,
    pub address: *const ucp_address_t,
    pub err_mode: ucp_err_handling_mode_t,
    pub err_handler: ucp_err_handler_t,
    pub user_data: *mut c_void,
    pub flags: c_uint,
    pub sockaddr: ucs_sock_addr_t,
    pub conn_request: *mut c_void,
    pub name: *const c_char,
    pub local_sockaddr: ucs_sock_addr_t,
}

/// `ucp_mem_map_params_t`.
#[repr(C)]
pub(crate) struct ucp_mem_map_params_t {
    pub field_mask: u64,
    pub address: *mut c_void,
    pub length: usize,
    pub flags: c_uint,
    pub prot: c_uint,
    pub memory_type: ucs_memory_type_t,
}

/// `ucp_request_param_t`. The two unions are declared by one member each:
/// `cb` (all function pointers) and `recv_info` (all data pointers).
#[repr(C)]
pub(crate) struct ucp_request_param_t {
    pub op_attr_mask: u32,
    pub flags: u32,
    pub request: *mut c_void,
    pub cb: ucp_send_nbx_callback_t,
    pub datatype: ucp_datatype_t,
    pub user_data: *mut c_void,
    pub reply_buffer: *mut c_void,
    pub memory_type: ucs_memory_type_t,
    pub recv_info: *mut c_void,
    pub memh: ucp_mem_h,
}

impl ucp_request_param_t {
    /// Parameters with no field set: no callback, no user request, byte
    /// datatype, and with `flags` (valid when `op_attr_mask` says so).
    pub(crate) fn with_flags(op_attr_mask: u32, flags: u32) -> Self {
        ucp_request_param_t {
            op_attr_mask,
            flags,
            request: std::ptr::null_mut(),
            cb: None,
            datatype: 0,
            user_data: std::ptr::null_mut(),
            reply_buffer: std::ptr::null_mut(),
            memory_type: UCS_MEMORY_TYPE_HOST,
            recv_info: std::ptr::null_mut(),
            memh: std::ptr::null_mut(),
        }
    }
}

/// The UCP functions the fabric calls, resolved from the loaded library.
///
/// The pointers stay valid for the life of the process: the library is never
/// unloaded (UCX keeps global state and handlers that do not survive
/// `dlclose`).
pub(crate) struct Ucx {
    _lib: ManuallyDrop<Library>,
    /// `(major, minor, release)` of the loaded library.
    pub version: (u32, u32, u32),
    pub ucp_get_version: unsafe extern "C" fn(major: *mut c_uint, minor: *mut c_uint, release: *mut c_uint),
    pub ucp_config_read: unsafe extern "C" fn(
        env_prefix: *const c_char,
        filename: *const c_char,
        config_p: *mut *mut ucp_config_t,
    ) -> RawStatus,
    pub ucp_config_modify:
        unsafe extern "C" fn(config: *mut ucp_config_t, name: *const c_char, value: *const c_char) -> RawStatus,
    pub ucp_config_release: unsafe extern "C" fn(config: *mut ucp_config_t),
    pub ucp_init_version: unsafe extern "C" fn(
        api_major_version: c_uint,
        api_minor_version: c_uint,
        params: *const ucp_params_t,
        config: *const ucp_config_t,
        context_p: *mut ucp_context_h,
    ) -> RawStatus,
    pub ucp_cleanup: unsafe extern "C" fn(context: ucp_context_h),
    pub ucp_context_query: unsafe extern "C" fn(context: ucp_context_h, attr: *mut ucp_context_attr_t) -> RawStatus,
    pub ucp_worker_create: unsafe extern "C" fn(
        context: ucp_context_h,
        params: *const ucp_worker_params_t,
        worker_p: *mut ucp_worker_h,
    ) -> RawStatus,
    pub ucp_worker_destroy: unsafe extern "C" fn(worker: ucp_worker_h),
    pub ucp_worker_get_address: unsafe extern "C" fn(
        worker: ucp_worker_h,
        address_p: *mut *mut ucp_address_t,
        address_length_p: *mut usize,
    ) -> RawStatus,
    pub ucp_worker_release_address: unsafe extern "C" fn(worker: ucp_worker_h, address: *mut ucp_address_t),
    pub ucp_worker_progress: unsafe extern "C" fn(worker: ucp_worker_h) -> c_uint,
    pub ucp_worker_fence: unsafe extern "C" fn(worker: ucp_worker_h) -> RawStatus,
    pub ucp_worker_get_efd: unsafe extern "C" fn(worker: ucp_worker_h, fd: *mut c_int) -> RawStatus,
    pub ucp_worker_arm: unsafe extern "C" fn(worker: ucp_worker_h) -> RawStatus,
    pub ucp_worker_flush_nbx:
        unsafe extern "C" fn(worker: ucp_worker_h, param: *const ucp_request_param_t) -> ucs_status_ptr_t,
    pub ucp_ep_create:
        unsafe extern "C" fn(worker: ucp_worker_h, params: *const ucp_ep_params_t, ep_p: *mut ucp_ep_h) -> RawStatus,
    pub ucp_ep_close_nbx: unsafe extern "C" fn(ep: ucp_ep_h, param: *const ucp_request_param_t) -> ucs_status_ptr_t,
    pub ucp_ep_flush_nbx: unsafe extern "C" fn(ep: ucp_ep_h, param: *const ucp_request_param_t) -> ucs_status_ptr_t,
    pub ucp_mem_map: unsafe extern "C" fn(
        context: ucp_context_h,
        params: *const ucp_mem_map_params_t,
        memh_p: *mut ucp_mem_h,
    ) -> RawStatus,
    pub ucp_mem_unmap: unsafe extern "C" fn(context: ucp_context_h, memh: ucp_mem_h) -> RawStatus,
    pub ucp_rkey_pack: unsafe extern "C" fn(
        context: ucp_context_h,
        memh: ucp_mem_h,
        rkey_buffer_p: *mut *mut c_void,
        size_p: *mut usize,
    ) -> RawStatus,
    pub ucp_rkey_buffer_release: unsafe extern "C" fn(rkey_buffer: *mut c_void),
    pub ucp_ep_rkey_unpack:
        unsafe extern "C" fn(ep: ucp_ep_h, rkey_buffer: *const c_void, rkey_p: *mut ucp_rkey_h) -> RawStatus,
    pub ucp_rkey_destroy: unsafe extern "C" fn(rkey: ucp_rkey_h),
    pub ucp_put_nbx: unsafe extern "C" fn(
        ep: ucp_ep_h,
        buffer: *const c_void,
        count: usize,
        remote_addr: u64,
        rkey: ucp_rkey_h,
        param: *const ucp_request_param_t,
    ) -> ucs_status_ptr_t,
    pub ucp_worker_set_am_recv_handler:
        unsafe extern "C" fn(worker: ucp_worker_h, param: *const ucp_am_handler_param_t) -> RawStatus,
    pub ucp_am_send_nbx: unsafe extern "C" fn(
        ep: ucp_ep_h,
        id: c_uint,
        header: *const c_void,
        header_length: usize,
        buffer: *const c_void,
        count: usize,
        param: *const ucp_request_param_t,
    ) -> ucs_status_ptr_t,
    pub ucp_request_check_status: unsafe extern "C" fn(request: *mut c_void) -> RawStatus,
    pub ucp_request_free: unsafe extern "C" fn(request: *mut c_void),
    /// From `libucs.so.0`, a dependency of `libucp.so.0`, found through the
    /// `libucp` handle.
    pub ucs_status_string: unsafe extern "C" fn(status: RawStatus) -> *const c_char,
}

impl Ucx {
    /// Loads `name` and resolves every function of the table.
    pub(crate) fn load_from(name: &str) -> Result<Ucx, UcxError> {
        // SAFETY: loading runs the library's initializers. UCX's (libucs,
        // libuct, libucm, libucp) only set up the library's own global state;
        // they do not depend on anything of this process beyond libc.
        let lib = unsafe { Library::new(name) }
            .map_err(|e| UcxError::NotFound { library: name.to_string(), reason: e.to_string() })?;

        macro_rules! sym {
            ($name:ident) => {{
                let symbol = concat!(stringify!($name), "\0");
                // SAFETY: the field's type is the function's C prototype as
                // declared in the UCX 1.13 headers (see the field), so the
                // copied pointer is called with the right signature. It stays
                // valid because the library is never unloaded.
                match unsafe { lib.get(symbol.as_bytes()) } {
                    Ok(f) => *f,
                    Err(e) => {
                        return Err(UcxError::MissingSymbol {
                            library: name.to_string(),
                            symbol: stringify!($name),
                            reason: e.to_string(),
                        })
                    }
                }
            }};
        }

        let mut ucx = Ucx {
            version: (0, 0, 0),
            ucp_get_version: sym!(ucp_get_version),
            ucp_config_read: sym!(ucp_config_read),
            ucp_config_modify: sym!(ucp_config_modify),
            ucp_config_release: sym!(ucp_config_release),
            ucp_init_version: sym!(ucp_init_version),
            ucp_cleanup: sym!(ucp_cleanup),
            ucp_context_query: sym!(ucp_context_query),
            ucp_worker_create: sym!(ucp_worker_create),
            ucp_worker_destroy: sym!(ucp_worker_destroy),
            ucp_worker_get_address: sym!(ucp_worker_get_address),
            ucp_worker_release_address: sym!(ucp_worker_release_address),
            ucp_worker_progress: sym!(ucp_worker_progress),
            ucp_worker_fence: sym!(ucp_worker_fence),
            ucp_worker_get_efd: sym!(ucp_worker_get_efd),
            ucp_worker_arm: sym!(ucp_worker_arm),
            ucp_worker_flush_nbx: sym!(ucp_worker_flush_nbx),
            ucp_ep_create: sym!(ucp_ep_create),
            ucp_ep_close_nbx: sym!(ucp_ep_close_nbx),
            ucp_ep_flush_nbx: sym!(ucp_ep_flush_nbx),
            ucp_mem_map: sym!(ucp_mem_map),
            ucp_mem_unmap: sym!(ucp_mem_unmap),
            ucp_rkey_pack: sym!(ucp_rkey_pack),
            ucp_rkey_buffer_release: sym!(ucp_rkey_buffer_release),
            ucp_ep_rkey_unpack: sym!(ucp_ep_rkey_unpack),
            ucp_rkey_destroy: sym!(ucp_rkey_destroy),
            ucp_put_nbx: sym!(ucp_put_nbx),
            ucp_worker_set_am_recv_handler: sym!(ucp_worker_set_am_recv_handler),
            ucp_am_send_nbx: sym!(ucp_am_send_nbx),
            ucp_request_check_status: sym!(ucp_request_check_status),
            ucp_request_free: sym!(ucp_request_free),
            ucs_status_string: sym!(ucs_status_string),
            _lib: ManuallyDrop::new(lib),
        };

        let (mut major, mut minor, mut release) = (0, 0, 0);
        // SAFETY: ucp_get_version only writes the three integers.
        unsafe { (ucx.ucp_get_version)(&mut major, &mut minor, &mut release) };
        ucx.version = (major, minor, release);
        if major != UCP_API_MAJOR {
            return Err(UcxError::Version { found: format!("{major}.{minor}.{release}") });
        }
        Ok(ucx)
    }

    /// UCX's text for `status` (`ucs_status_string`).
    ///
    /// Only codes that `ucs_status_string` of 1.13 names are passed to it:
    /// for any other code it formats into one static buffer shared by all
    /// threads, so those are spelled here instead.
    pub(crate) fn status_text(&self, status: ucs_status_t) -> String {
        let named = (UCS_ERR_CONNECTION_RESET..=UCS_INPROGRESS).contains(&status) || status == UCS_ERR_ENDPOINT_TIMEOUT;
        if !named {
            return match status {
                -59..=-40 => format!("link failure {status}"),
                -89..=-60 => format!("endpoint failure {status}"),
                _ => format!("unknown UCX status {status}"),
            };
        }
        // SAFETY: for the codes named in its switch, ucs_status_string
        // returns a pointer to a static NUL-terminated string literal.
        let text = unsafe { (self.ucs_status_string)(RawStatus::from(status)) };
        if text.is_null() {
            return format!("UCX status {status}");
        }
        // SAFETY: non-null, NUL-terminated and static (see above).
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    }

    /// `Ok(())` for `UCS_OK`, else the error of `function`.
    pub(crate) fn check(&self, function: &'static str, raw: RawStatus) -> Result<(), UcxError> {
        match status_of(raw) {
            UCS_OK => Ok(()),
            status => Err(self.error(function, status)),
        }
    }

    /// The error of `function` returning `status`.
    pub(crate) fn error(&self, function: &'static str, status: ucs_status_t) -> UcxError {
        UcxError::Call { function, status, text: self.status_text(status) }
    }
}
