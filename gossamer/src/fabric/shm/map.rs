//! Shared memory for the region of a multi-process program: a POSIX shared
//! memory object that rank 0 creates and every process maps.

use std::ffi::CString;
use std::io;
use std::ptr::NonNull;

/// Creates (`create`) or opens the object `name` of `len` bytes and maps it.
pub(crate) fn map(name: &str, len: usize, create: bool) -> io::Result<NonNull<u8>> {
    let cname = CString::new(name).map_err(io::Error::other)?;
    let flags = if create { libc::O_CREAT | libc::O_EXCL | libc::O_RDWR } else { libc::O_RDWR };
    // SAFETY: plain libc calls on a NUL-terminated name and our own fd.
    unsafe {
        let fd = libc::shm_open(cname.as_ptr(), flags, 0o600);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        if create && libc::ftruncate(fd, len as libc::off_t) != 0 {
            let e = io::Error::last_os_error();
            libc::close(fd);
            libc::shm_unlink(cname.as_ptr());
            return Err(e);
        }
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
        let e = io::Error::last_os_error();
        libc::close(fd);
        if p == libc::MAP_FAILED {
            return Err(e);
        }
        Ok(NonNull::new(p.cast()).expect("mmap returned null"))
    }
}

/// Removes the object's name (mappings stay valid).
pub(crate) fn unlink(name: &str) {
    if let Ok(c) = CString::new(name) {
        // SAFETY: NUL-terminated name.
        unsafe { libc::shm_unlink(c.as_ptr()) };
    }
}
