//! What the benchmark runs on: core count, CPU model, the exact command
//! line. Printed at the start of every run and stored next to the results.

use std::time::Duration;

/// Cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The CPU model as the kernel names it, if it says.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The 1, 5 and 15 minute load averages, if the kernel says (a busy
/// machine distorts every figure, delegation's most).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// The 1-minute load average, if the kernel says.
pub fn load1() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// The command line this process was started with.
pub fn command_line() -> String {
    let mut args = std::env::args();
    let exe = args.next().map(|a| a.rsplit('/').next().unwrap_or(&a).to_string()).unwrap_or_default();
    std::iter::once(exe).chain(args).collect::<Vec<_>>().join(" ")
}

/// The header block printed before every run.
pub fn header(config: &str) -> String {
    format!(
        "gossamer-bench {}\nmachine: {} cores available, {} ({}, {}), load average {}\ncommand: {}\nconfig:  {}\n",
        env!("CARGO_PKG_VERSION"),
        cores(),
        cpu_model(),
        std::env::consts::OS,
        std::env::consts::ARCH,
        load_average(),
        command_line(),
        config
    )
}

/// CPU time used by this process so far (all threads).
pub fn process_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Pins the calling OS thread to core `i` modulo the core count.
pub fn pin_current(i: usize) {
    if let Some(ids) = core_affinity::get_core_ids() {
        if !ids.is_empty() {
            core_affinity::set_for_current(ids[i % ids.len()]);
        }
    }
}
