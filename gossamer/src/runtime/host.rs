//! The name of the host this process runs on, as the runtime groups the
//! program's processes by host.

/// The name of this host, as the program groups processes by host:
/// `GOSSAMER_HOST` when set (so that network namespaces on one machine can
/// stand for separate hosts), else the kernel's host name.
pub fn host_name() -> String {
    if let Ok(h) = std::env::var("GOSSAMER_HOST") {
        if !h.is_empty() {
            return h;
        }
    }
    if cfg!(miri) {
        return "localhost".into();
    }
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname NUL-terminates
    // within it on success.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if ok && end > 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "localhost".into()
    }
}
