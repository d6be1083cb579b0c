//! Which code can be named by its offset in the binary: only code of the
//! loaded object that holds gossamer itself (the program's executable, as
//! gossamer is linked statically).
//!
//! Code crosses processes as its offset from an anchor function (see
//! `remote`), which is the same in every process only for code of the same
//! loaded object. A `fn` of a shared library (the standard library built
//! with `-C prefer-dynamic`, a plugin) lies at an offset from the binary
//! that differs between processes, since each object is placed at its own
//! random address: such a `fn` is refused before it is sent.

use std::ops::Range;
use std::sync::OnceLock;

/// The addresses of the loaded object that holds `anchor`, from its
/// program headers (all of it when they cannot be read).
#[cfg(all(target_os = "linux", not(miri)))]
fn object_of(anchor: usize) -> Range<usize> {
    use std::ffi::{c_int, c_void};

    struct Search {
        anchor: usize,
        found: Option<Range<usize>>,
    }

    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `dl_iterate_phdr` passes a valid `info` for the duration
        // of the call, whose `dlpi_phdr` points at `dlpi_phnum` headers, and
        // `data` is the `Search` given below, used by this thread only.
        let (info, search) = unsafe { (&*info, &mut *data.cast::<Search>()) };
        if info.dlpi_phdr.is_null() {
            return 0;
        }
        // SAFETY: as above.
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let (mut lo, mut hi) = (usize::MAX, 0usize);
        for h in headers.iter().filter(|h| h.p_type == libc::PT_LOAD) {
            let start = (info.dlpi_addr as usize).wrapping_add(h.p_vaddr as usize);
            lo = lo.min(start);
            hi = hi.max(start.saturating_add(h.p_memsz as usize));
        }
        if (lo..hi).contains(&search.anchor) {
            search.found = Some(lo..hi);
            return 1;
        }
        0
    }

    let mut search = Search { anchor, found: None };
    // SAFETY: `each` matches the callback type and only reads what the
    // loader hands it; `search` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut search as *mut Search).cast()) };
    search.found.unwrap_or(0..usize::MAX)
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn object_of(_anchor: usize) -> Range<usize> {
    0..usize::MAX
}

/// A function of gossamer, to find its loaded object by.
#[inline(never)]
fn marker() {}

/// Whether `addr` lies in the loaded object that holds gossamer's code (the
/// object is looked up once per process).
pub(crate) fn in_binary(addr: usize) -> bool {
    static OBJECT: OnceLock<Range<usize>> = OnceLock::new();
    OBJECT.get_or_init(|| object_of(marker as fn() as usize)).contains(&addr)
}

#[cfg(all(test, not(loom), not(miri)))]
mod tests {
    use super::*;

    fn here() {}

    #[test]
    fn code_of_the_binary_is_in_it_and_code_of_a_shared_library_is_not() {
        assert!(in_binary(marker as fn() as usize));
        assert!(in_binary(here as fn() as usize));
        // `getpid` as the C library has it, in its own shared object.
        // SAFETY: `dlsym` with a NUL-terminated name; the result is only
        // compared, never called.
        let getpid = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"getpid".as_ptr()) } as usize;
        assert_ne!(getpid, 0);
        assert!(!in_binary(getpid), "libc's getpid was taken for code of the binary");
    }
}
