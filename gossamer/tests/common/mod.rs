//! Shared helpers for the integration tests.
#![allow(dead_code)]

pub mod moves;
pub mod netem;
pub mod netns;
pub mod objects;
pub mod programs;
pub mod tally;
pub mod top;

#[allow(unused_imports)]
pub use netns::skip;

use std::sync::mpsc;
use std::time::Duration;

/// Runs `f` on its own thread and fails the test if it takes longer than
/// `secs` seconds, so that a hang becomes a failure instead of a stuck CI.
/// Under a sanitizer (`GOSSAMER_SANITIZER`), which slows every step and
/// makes printing a panic's backtrace take seconds, the limit is 4× longer.
pub fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> R {
    let secs = if std::env::var_os("GOSSAMER_SANITIZER").is_some() { secs * 4 } else { secs };
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => match h.join().expect("test thread") {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(_) => panic!("test did not finish within {secs} s (hang?)"),
    }
}

/// From a fiber: yields until `done` holds or `limit` has passed; whether
/// it holds (the caller asserts what it expected).
pub fn yield_until(limit: Duration, done: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        gossamer::yield_now();
    }
    true
}

/// A runtime with `n` workers that are one process: tests of what one
/// process allows (closures that capture, `spawn_on`) use it.
pub fn rt(n: usize) -> gossamer::Runtime {
    gossamer::Runtime::builder().workers(n).build().expect("runtime")
}

/// A runtime with `n` workers in strict mode: every worker is its own
/// simulated process, so code that passes here keeps every rule that holds
/// between processes. Tests of code meant for a rack use it.
#[allow(dead_code)]
pub fn strict_rt(n: usize) -> gossamer::Runtime {
    gossamer::Runtime::builder().workers(n).strict(1).build().expect("runtime")
}

/// `target/<profile>/examples/NAME`, built here when the test run did not
/// build it (`cargo test --test X` builds only that test) or built it
/// before this test. `None` (the test says SKIPPED and returns) in a
/// sanitizer run (`GOSSAMER_SANITIZER`), which builds only test targets,
/// for its own target and with its own flags that a plain `cargo build`
/// here cannot repeat; the plain run tests the examples.
pub fn example(name: &str) -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).expect("target/<profile>/deps").join("examples");
    let bin = dir.join(name);
    let built = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if built(&bin).is_none_or(|b| built(&exe).is_some_and(|e| b < e)) {
        if std::env::var_os("GOSSAMER_SANITIZER").is_some() {
            skip::skipped(&format!(
                "examples/{name} is not built by a sanitizer run, which builds test targets only; the plain run tests it"
            ));
            return None;
        }
        let mut cargo = std::process::Command::new(env!("CARGO"));
        cargo.current_dir(env!("CARGO_MANIFEST_DIR")).args(["build", "-p", "gossamer", "--example", name]);
        if !cfg!(debug_assertions) {
            cargo.arg("--release");
        }
        let (out, _) = programs::run_program(cargo, Duration::from_secs(600));
        assert!(out.status.success(), "cargo build --example {name} failed:\n{}", programs::text(&out));
    }
    assert!(bin.is_file(), "{} is missing after the build", bin.display());
    Some(bin)
}

/// After `gossamer::main` returned on rank 0 (the only rank that returns):
/// nothing the program started outlives it. Its threads, UCX's among them,
/// are gone: a thread that still tore down the fabric while the process
/// exits would race UCX's own destructors (UCX 1.13 aborts in `vfs_obj.c`).
pub fn assert_no_thread_left(who: &str) {
    let left = threads_left();
    assert!(left.is_empty(), "threads outlive gossamer::main on {who}: {left:?}");
}

/// The names of this process's threads other than the main thread, the
/// calling one and the SIGUSR1 dumper (installed once per process), after
/// a short grace for threads on their way out of the kernel. Under a
/// sanitizer (`GOSSAMER_SANITIZER`), threads named as the main thread are
/// left out too: ThreadSanitizer's runtime starts a background thread of
/// its own from the main thread, which inherits its name (ours are all
/// named, and UCX's is `async`).
fn threads_left() -> Vec<String> {
    let me = std::fs::read_link("/proc/thread-self").unwrap();
    let me = me.file_name().unwrap().to_string_lossy().into_owned();
    let main = std::process::id().to_string();
    let comm =
        |tid: &str| std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok().map(|c| c.trim().to_string());
    let sanitizer_thread = std::env::var_os("GOSSAMER_SANITIZER").and(comm(&main));
    let mut left = Vec::new();
    for _ in 0..20 {
        left = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|tid| *tid != me && *tid != main)
            .filter_map(|tid| comm(&tid))
            .filter(|c| c != "gossamer-sigusr" && Some(c) != sanitizer_thread.as_ref())
            .collect();
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    left
}
