//! Stack overflow in a fiber: a clear message and an abort, as std gives a
//! thread that overflows its stack, instead of a bare SIGSEGV.
//!
//! Every fiber stack (a `corosensei` `DefaultStack`) has one inaccessible
//! guard page below it, and Rust's stack probes touch every page of a large
//! frame, so running off the end of a fiber stack always faults inside
//! that guard page. While a fiber runs, its thread records the fiber's
//! guard page and stack size ([`Running`]). A `SIGSEGV`/`SIGBUS` handler,
//! installed once per process and run on the thread's alternate signal
//! stack (std gives its threads one; a worker thread without one gets one
//! here, [`AltStack`]), checks the faulting address: inside the running
//! fiber's guard page it writes
//!
//! ```text
//! thread 'NAME': a gossamer fiber has overflowed its stack (fiber stacks are N bytes; raise Builder::stack_size)
//! fatal runtime error: stack overflow, aborting
//! ```
//!
//! and aborts (SIGABRT), as std does. Any other fault goes to the handler
//! that was installed before (std's, which reports overflows of thread
//! stacks, or the default action).

use std::cell::Cell;
use std::sync::OnceLock;

thread_local! {
    /// The running fiber's guard page `[lo, hi)` and stack size; zeros
    /// while no fiber runs on this thread.
    static GUARD: Cell<(usize, usize, usize)> = const { Cell::new((0, 0, 0)) };
}

/// The handlers in place before ours, for `SIGSEGV` and `SIGBUS`.
static PREVIOUS: OnceLock<[libc::sigaction; 2]> = OnceLock::new();

fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize)
}

/// Installs the fault handler, once per process.
pub(crate) fn install() {
    PREVIOUS.get_or_init(|| {
        let mut prev: [libc::sigaction; 2] =
            // SAFETY: `sigaction` is plain data; all zeros is a valid value.
            unsafe { std::mem::zeroed() };
        for (i, sig) in [libc::SIGSEGV, libc::SIGBUS].into_iter().enumerate() {
            // SAFETY: zeroed `sigaction` is valid; the handler is an
            // `extern "C"` function of the SA_SIGINFO signature; the old
            // action is written to our own array.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_fault as *const () as usize;
                act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut act.sa_mask);
                libc::sigaction(sig, &act, &mut prev[i]);
            }
        }
        prev
    });
}

/// Records, for the fault handler, the fiber about to run on this thread;
/// the previous record comes back when this is dropped (also when a panic
/// unwinds out of the fiber).
pub(crate) struct Running {
    prev: (usize, usize, usize),
}

impl Running {
    /// `stack_low` is the lowest address of the fiber's stack mapping (its
    /// guard page); `stack_size` the size the runtime asked for.
    pub(crate) fn enter(stack_low: usize, stack_size: usize) -> Running {
        Running { prev: GUARD.with(|g| g.replace((stack_low, stack_low + page_size(), stack_size))) }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        GUARD.with(|g| g.set(self.prev));
    }
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (lo, hi, size) = GUARD.try_with(|g| g.get()).unwrap_or((0, 0, 0));
    if lo <= addr && addr < hi {
        report(size);
        // SAFETY: abort is async-signal-safe.
        unsafe { libc::abort() };
    }
    chain(sig, info, ctx);
}

/// Writes the overflow message with async-signal-safe calls only.
fn report(size: usize) {
    let mut buf = [0u8; 512];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        let k = b.len().min(buf.len() - n);
        buf[n..n + k].copy_from_slice(&b[..k]);
        n += k;
    };
    put(b"\nthread '");
    let mut name = [0u8; 16];
    // SAFETY: the buffer is 16 bytes, the size Linux thread names take
    // (with their NUL); the call writes at most that.
    let got = unsafe { libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr().cast(), name.len()) };
    let len = if got == 0 { name.iter().position(|&b| b == 0).unwrap_or(0) } else { 0 };
    put(if len > 0 { &name[..len] } else { b"<unnamed>" });
    put(b"': a gossamer fiber has overflowed its stack (fiber stacks are ");
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = size;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    put(&digits[i..]);
    put(b" bytes; raise Builder::stack_size)\nfatal runtime error: stack overflow, aborting\n");
    // SAFETY: write(2) is async-signal-safe; the buffer holds `n` bytes.
    unsafe { libc::write(2, buf.as_ptr().cast(), n) };
}

/// Hands a fault that is not a fiber's overflow to the handler installed
/// before ours; with none (or an ignored signal), restores the default
/// action and returns, so that the faulting instruction faults again and
/// the process ends as it would have without us.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let i = if sig == libc::SIGSEGV { 0 } else { 1 };
    let Some(prev) = PREVIOUS.get().map(|p| p[i]) else { return default(sig) };
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return default(sig);
    }
    if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: a handler installed with SA_SIGINFO has this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a handler installed without SA_SIGINFO has this signature.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

fn default(sig: libc::c_int) {
    // SAFETY: resetting a signal to its default action is always valid.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(sig, &act, std::ptr::null_mut());
    }
}

/// An alternate signal stack for a worker thread that has none (std gives
/// one to the threads it starts while its own handler is installed), so
/// that the fault handler can run when the fiber stack is exhausted.
/// Removed, and unmapped, when dropped.
pub(crate) struct AltStack {
    mapping: *mut libc::c_void,
    len: usize,
}

impl AltStack {
    pub(crate) fn ensure() -> AltStack {
        let none = AltStack { mapping: std::ptr::null_mut(), len: 0 };
        // SAFETY: querying the current alternate stack writes only `old`.
        let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above: a query, which writes only `old`.
        if unsafe { libc::sigaltstack(std::ptr::null(), &mut old) } != 0 || old.ss_flags & libc::SS_DISABLE == 0 {
            return none;
        }
        let len = 64 * 1024 + page_size();
        // SAFETY: an anonymous private mapping; checked for failure.
        let mapping = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mapping == libc::MAP_FAILED {
            return none;
        }
        // SAFETY: the lowest page becomes a guard page of our own mapping;
        // the rest is handed to the kernel as this thread's signal stack.
        unsafe {
            libc::mprotect(mapping, page_size(), libc::PROT_NONE);
            let st = libc::stack_t {
                ss_sp: mapping.cast::<u8>().add(page_size()).cast(),
                ss_flags: 0,
                ss_size: len - page_size(),
            };
            if libc::sigaltstack(&st, std::ptr::null_mut()) != 0 {
                libc::munmap(mapping, len);
                return none;
            }
        }
        AltStack { mapping, len }
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        if self.mapping.is_null() {
            return;
        }
        // SAFETY: we installed this stack on this thread (the struct is
        // not Send); disable it before unmapping it.
        unsafe {
            let st = libc::stack_t { ss_sp: std::ptr::null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 };
            libc::sigaltstack(&st, std::ptr::null_mut());
            libc::munmap(self.mapping, self.len);
        }
    }
}
