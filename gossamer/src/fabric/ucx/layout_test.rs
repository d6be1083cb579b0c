//! Checks the declarations of `ffi` against the installed UCX headers: a C
//! program compiled here with `cc` prints the size, alignment and field
//! offsets and sizes of every struct `ffi` declares, the sizes of the types
//! it uses, the values of its constants and what `UCS_PTR_IS_ERR` says of a
//! few pointers; each is compared with what Rust computes.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::mem::{align_of, offset_of, size_of};
use std::process::Command;

use super::ffi;
use super::tests::skip;

fn field_size<T, F>(_: fn(&T) -> &F) -> u64 {
    size_of::<F>() as u64
}

/// Pointers given to `UCS_PTR_IS_ERR` on both sides.
const PTR_PROBES: [i64; 7] = [0, 1, 4096, -1, -25, -100, -101];

#[test]
fn ffi_matches_the_installed_headers() {
    let mut c = String::new();
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    let mut line = |key: String, c_expr: String, rust: i64| {
        c.push_str(&format!("    printf(\"{key} %lld\\n\", (long long)({c_expr}));\n"));
        assert!(want.insert(key, rust).is_none());
    };

    macro_rules! structs {
        ($($ty:ident { $($field:ident),* $(,)? })*) => {$(
            let ty = stringify!($ty);
            line(format!("size {ty}"), format!("sizeof({ty})"), size_of::<ffi::$ty>() as i64);
            line(format!("align {ty}"), format!("_Alignof({ty})"), align_of::<ffi::$ty>() as i64);
            $(
                let field = stringify!($field);
                line(
                    format!("offset {ty}.{field}"),
                    format!("offsetof({ty}, {field})"),
                    offset_of!(ffi::$ty, $field) as i64,
                );
                line(
                    format!("fieldsize {ty}.{field}"),
                    format!("sizeof((({ty} *)0)->{field})"),
                    field_size(|s: &ffi::$ty| &s.$field) as i64,
                );
            )*
        )*};
    }
    macro_rules! types {
        ($($ty:ident),* $(,)?) => {$(
            let ty = stringify!($ty);
            line(format!("typesize {ty}"), format!("sizeof({ty})"), size_of::<ffi::$ty>() as i64);
        )*};
    }
    macro_rules! consts {
        ($($name:ident),* $(,)?) => {$(
            let name = stringify!($name);
            line(format!("const {name}"), name.to_string(), ffi::$name as i64);
        )*};
    }

    structs! {
        ucp_params_t {
            field_mask, features, request_size, request_init, request_cleanup, tag_sender_mask,
            mt_workers_shared, estimated_num_eps, estimated_num_ppn, name,
        }
        ucp_context_attr_t { field_mask, request_size, thread_mode, memory_types, name }
        ucs_cpu_set_t { ucs_bits }
        ucp_worker_params_t {
            field_mask, thread_mode, cpu_mask, events, user_data, event_fd, flags, name, am_alignment, client_id,
        }
        ucp_err_handler_t { cb, arg }
        ucs_sock_addr_t { addr, addrlen }
        ucp_ep_params_t {
            field_mask, address, err_mode, err_handler, user_data, flags, sockaddr, conn_request, name,
            local_sockaddr,
        }
        ucp_mem_map_params_t { field_mask, address, length, flags, prot, memory_type }
        ucp_request_param_t {
            op_attr_mask, flags, request, cb, datatype, user_data, reply_buffer, memory_type, recv_info, memh,
        }
        ucp_am_handler_param_t { field_mask, id, flags, cb, arg }
        ucp_am_recv_param_t { recv_attr, reply_ep }
        ucp_dt_iov_t { buffer, length }
    }
    types! {
        ucs_status_t, ucs_status_ptr_t, ucs_thread_mode_t, ucs_memory_type_t, ucp_err_handling_mode_t,
        ucp_datatype_t, ucp_context_h, ucp_worker_h, ucp_ep_h, ucp_mem_h, ucp_rkey_h,
    }
    line("signed ucs_status_t".into(), "(ucs_status_t)-1 < 0".into(), i64::from(ffi::ucs_status_t::MIN < 0));
    consts! {
        UCS_OK, UCS_INPROGRESS, UCS_ERR_NO_MESSAGE, UCS_ERR_IO_ERROR, UCS_ERR_INVALID_PARAM, UCS_ERR_UNREACHABLE,
        UCS_ERR_CANCELED, UCS_ERR_TIMED_OUT, UCS_ERR_CONNECTION_RESET, UCS_ERR_ENDPOINT_TIMEOUT, UCS_ERR_LAST,
        UCS_THREAD_MODE_SINGLE, UCS_THREAD_MODE_SERIALIZED, UCS_THREAD_MODE_MULTI, UCS_MEMORY_TYPE_HOST,
        UCP_PARAM_FIELD_FEATURES, UCP_PARAM_FIELD_MT_WORKERS_SHARED, UCP_PARAM_FIELD_NAME, UCP_FEATURE_RMA,
        UCP_ATTR_FIELD_THREAD_MODE, UCP_WORKER_PARAM_FIELD_THREAD_MODE, UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE, UCP_EP_PARAM_FIELD_ERR_HANDLER, UCP_ERR_HANDLING_MODE_PEER,
        UCP_EP_CLOSE_FLAG_FORCE, UCP_MEM_MAP_PARAM_FIELD_ADDRESS, UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        UCP_MEM_MAP_PARAM_FIELD_FLAGS, UCP_MEM_MAP_PARAM_FIELD_PROT, UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        UCP_MEM_MAP_PROT_LOCAL_READ, UCP_MEM_MAP_PROT_LOCAL_WRITE, UCP_MEM_MAP_PROT_REMOTE_READ,
        UCP_MEM_MAP_PROT_REMOTE_WRITE, UCP_OP_ATTR_FIELD_FLAGS, UCP_ENTITY_NAME_MAX, UCP_API_MAJOR,
        UCP_FEATURE_WAKEUP, UCP_FEATURE_AM, UCP_AM_FLAG_WHOLE_MSG, UCP_AM_SEND_FLAG_EAGER, UCP_AM_RECV_ATTR_FLAG_RNDV,
        UCP_AM_HANDLER_PARAM_FIELD_ID, UCP_AM_HANDLER_PARAM_FIELD_FLAGS, UCP_AM_HANDLER_PARAM_FIELD_CB,
        UCP_AM_HANDLER_PARAM_FIELD_ARG, UCP_DATATYPE_IOV, UCP_OP_ATTR_FIELD_DATATYPE,
    }
    for v in PTR_PROBES {
        line(
            format!("UCS_PTR_IS_ERR({v})"),
            format!("UCS_PTR_IS_ERR((void *)(intptr_t){v}LL)"),
            i64::from(ffi::ptr_is_err(v as isize as *mut c_void)),
        );
    }
    let checks = want.len();

    let program = format!(
        "#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <ucp/api/ucp.h>\n\n\
         int main(void) {{\n{c}    printf(\"api %d.%d\\n\", UCP_API_MAJOR, UCP_API_MINOR);\n    return 0;\n}}\n"
    );
    let dir = std::env::temp_dir().join(format!("gossamer-ucx-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, program).unwrap();
    let compiled = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .output();
    let compiled = match compiled {
        Ok(out) => out,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return skip(
                "ffi_matches_the_installed_headers",
                &format!("needs a C compiler (apt install gcc): cc: {e}"),
            );
        }
    };
    if !compiled.status.success() {
        let stderr = String::from_utf8_lossy(&compiled.stderr).into_owned();
        let _ = std::fs::remove_dir_all(&dir);
        if stderr.contains("ucp/api/ucp.h") && stderr.contains("No such file") {
            return skip("ffi_matches_the_installed_headers", "needs the UCX headers (apt install libucx-dev)");
        }
        panic!("the layout program did not compile:\n{stderr}");
    }
    let out = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "the layout program failed: {out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();

    let mut mismatches = Vec::new();
    let mut seen = 0;
    for l in stdout.lines() {
        if let Some(api) = l.strip_prefix("api ") {
            eprintln!("UCX headers: API {api}; {checks} declarations checked");
            continue;
        }
        let (key, value) = l.rsplit_once(' ').unwrap();
        let value: i64 = value.parse().unwrap();
        let rust = want[key];
        seen += 1;
        if rust != value {
            mismatches.push(format!("{key}: C says {value}, Rust says {rust}"));
        }
    }
    assert_eq!(seen, checks, "the C program printed {seen} of {checks} checks:\n{stdout}");
    assert!(mismatches.is_empty(), "ffi.rs disagrees with the UCX headers:\n{}", mismatches.join("\n"));
}
