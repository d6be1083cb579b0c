//! What this host offers (`Query`): cores, memory, and the UCX transports
//! and devices `ucx_info -d` lists, run without blocking the event loop and
//! bounded in time and output.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::proto::HostInfo;

/// How long `ucx_info -d` may take.
const UCX_TIMEOUT: Duration = Duration::from_secs(10);
/// The most output of `ucx_info -d` read.
const UCX_MAX: u64 = 4 << 20;

/// What this host offers (for callers outside the daemon's event loop).
pub fn host_info(host: &str) -> HostInfo {
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt.block_on(host_info_async(host)),
        Err(e) => with_ucx(host, Err(format!("not available ({e})"))),
    }
}

/// What this host offers.
pub async fn host_info_async(host: &str) -> HostInfo {
    with_ucx(host, ucx_info().await)
}

fn with_ucx(host: &str, ucx: Result<String, String>) -> HostInfo {
    // SAFETY: sysconf has no preconditions.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
    let memory_bytes = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next().and_then(|k| k.parse::<u64>().ok()))
        })
        .map_or(0, |kib| kib * 1024);
    let (transports, devices) = match ucx {
        Ok(text) => {
            let mut ts: Vec<String> = vec![];
            let mut ds: Vec<String> = vec![];
            let mut current = String::new();
            for line in text.lines() {
                let l = line.trim_start_matches(['#', ' ', '\t']);
                if let Some(t) = l.strip_prefix("Transport:") {
                    current = t.trim().to_string();
                    if !ts.contains(&current) {
                        ts.push(current.clone());
                    }
                } else if let Some(d) = l.strip_prefix("Device:") {
                    let d = format!("{current}/{}", d.trim());
                    if !ds.contains(&d) {
                        ds.push(d);
                    }
                }
            }
            (Ok(ts), ds)
        }
        Err(e) => (Err(e), vec![]),
    };
    HostInfo { host: host.into(), cores, memory_bytes, transports, devices, version: env!("CARGO_PKG_VERSION").into() }
}

/// The output of `ucx_info -d`, or why there is none (not installed, cannot
/// be started, too slow).
async fn ucx_info() -> Result<String, String> {
    let mut child = tokio::process::Command::new("ucx_info")
        .arg("-d")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("not available (ucx_info cannot be started: {e})"))?;
    let Some(out) = child.stdout.take() else { return Err("not available (no output pipe)".into()) };
    let run = async {
        let mut text = vec![];
        out.take(UCX_MAX).read_to_end(&mut text).await.map_err(|e| format!("not available ({e})"))?;
        child.wait().await.map_err(|e| format!("not available ({e})"))?;
        Ok(String::from_utf8_lossy(&text).into_owned())
    };
    match tokio::time::timeout(UCX_TIMEOUT, run).await {
        Ok(r) => r,
        Err(_) => Err(format!("not available (ucx_info -d took over {} s)", UCX_TIMEOUT.as_secs())),
    }
}
