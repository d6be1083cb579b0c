//! The socket `gossamer top` reads: a Unix stream socket at
//! `$GOSSAMER_TOP_SOCKET`, else `$XDG_RUNTIME_DIR/gossamer-<pid>.sock`,
//! else `/tmp/gossamer-<pid>.sock`; created (mode 0600) at start when the
//! builder or `GOSSAMER_TOP=1` asks for it, removed at shutdown.
//!
//! One client at a time sends commands, one per line, and gets answers:
//!
//! | command              | answer                                            |
//! |----------------------|---------------------------------------------------|
//! | `profile all`        | `ok` (profiles every trust and trustee)           |
//! | `profile trustee N`  | `ok`                                              |
//! | `profile off`        | `ok`                                              |
//! | `reset`              | `ok` (zeroes the counters)                        |
//! | `snapshot`           | the profile's line format (see `profile`), `end`  |
//! | `stuck`              | the stuck dump as text, then a line `end`         |
//! | `settings`           | `dedicated K fixed\|auto WORKERS`, one `params` line per worker, `end` |
//! | `dedicated K`        | `ok`: K dedicated trustees from now on, controller off |
//! | `dedicated auto`     | `ok`: the controller picks K                      |
//! | `set all\|N KEY=V …` | `ok`: trustee parameters of every worker, or of N |
//! | `adaptive`           | `adaptive ID TRUSTEE POLICY MODE` per adaptive trust, `end` |
//! | `policy ID P`        | `ok`: policy `delegate`, `adaptive` or `lock` for adaptive trust ID |
//! | `follow`             | `follow ID HOLDER on\|off MOVES KEY=V …` per property that follows its requests, `end` |
//! | `follow ID [on\|off] [KEY=V …]` | `ok`: pauses, resumes or retunes that property |
//! | anything else        | `error <reason>`                                  |
//!
//! A `params` line reads `params N tight_polls=… idle_spin_us=…
//! sleep_poll_us=… fiber_yield=…`; `set` takes the same keys (see
//! `TrusteeParams` for their bounds). An `adaptive` line gives the trust's
//! id in hexadecimal (as `snapshot` does), its trustee, its policy and the
//! mode it is in now (`delegate` or `lock`); more than 10,000 are cut
//! short with a line `more N`. `policy` takes the same id, with or without
//! `0x`. A `follow` line lists a property given
//! `MigrationPolicy::Follow` by its id, the trustee that holds it now,
//! whether it follows (`off`: paused here), how often it has moved, and
//! its parameters (`window`, `window_ms`, `share_percent`,
//! `return_percent`, `rest_windows`, see `FollowParams`); `follow ID`
//! changes any of them, all or nothing. Lines longer than 1024 bytes are
//! refused and end the connection.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::profile::{counters, Target};
use super::shared::Shared;
use super::stuck;
use super::top_adaptive;
use super::top_command::{self, Command, MAX_LINE};
use super::top_follow;
use super::tuning::DedicatedPolicy;

/// Sockets being served, by runtime id.
static SERVING: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());

/// The documented socket path for process `pid`.
pub(crate) fn path_for(pid: u32) -> PathBuf {
    if let Some(p) = std::env::var_os("GOSSAMER_TOP_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    dir.join(format!("gossamer-{pid}.sock"))
}

pub(crate) fn serving(sh: &Shared) -> Option<PathBuf> {
    SERVING.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(id, _)| *id == sh.id).map(|(_, p)| p.clone())
}

pub(crate) fn start(sh: &Arc<Shared>) {
    let path = path_for(std::process::id());
    if SERVING.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|(_, p)| *p == path) {
        tracing::warn!(path = %path.display(), "another runtime of this process serves gossamer top already");
        return;
    }
    // A socket left by a dead process with our pid (pids are reused).
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(path = %path.display(), "cannot serve gossamer top: {e}");
            return;
        }
    };
    // Only this user may switch profiling on or read the program's types.
    let private = std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600));
    if let Err(e) = private.and_then(|()| listener.set_nonblocking(true)) {
        let _ = std::fs::remove_file(&path);
        tracing::warn!("cannot serve gossamer top: {e}");
        return;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (weak, stop2) = (Arc::downgrade(sh), stop.clone());
    let spawned = std::thread::Builder::new().name("gossamer-top".into()).spawn(move || serve(listener, weak, stop2));
    let handle = match spawned {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!("cannot serve gossamer top: {e}");
            let _ = std::fs::remove_file(&path);
            return;
        }
    };
    tracing::info!(path = %path.display(), "serving gossamer top");
    SERVING.lock().unwrap_or_else(|e| e.into_inner()).push((sh.id, path.clone()));
    let id = sh.id;
    sh.observe.services.lock().unwrap_or_else(|e| e.into_inner()).push(Box::new(move || {
        stop.store(true, Ordering::Relaxed);
        let _ = handle.join();
        let _ = std::fs::remove_file(&path);
        SERVING.lock().unwrap_or_else(|e| e.into_inner()).retain(|(i, _)| *i != id);
    }));
}

const POLL: Duration = Duration::from_millis(50);

fn serve(listener: UnixListener, sh: Weak<Shared>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = client(stream, &sh, &stop) {
                    tracing::debug!("gossamer top client left: {e}");
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => {
                tracing::warn!("gossamer top socket: {e}");
                std::thread::sleep(POLL);
            }
        }
    }
}

fn client(stream: UnixStream, sh: &Weak<Shared>, stop: &AtomicBool) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(POLL))?;
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        // Never more than one line's worth of a hostile peer's bytes.
        let room = (MAX_LINE + 2).saturating_sub(line.len()) as u64;
        match (&mut reader).take(room).read_line(&mut line) {
            Ok(_) if line.len() > MAX_LINE + 1 => {
                out.write_all(format!("error command longer than {MAX_LINE} bytes\n").as_bytes())?;
                return Ok(());
            }
            Ok(0) => return Ok(()),
            Ok(_) if !line.ends_with('\n') => continue,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) => return Err(e),
        }
        let Some(sh) = sh.upgrade().filter(|s| !s.stopped()) else { return Ok(()) };
        let answer = answer(&sh, line.trim());
        line.clear();
        out.write_all(answer.as_bytes())?;
    }
}

/// An answer that lists rows: at most `max` of the `lines` (each with its
/// newline), then `more N` if N were left out, then `end`.
pub(crate) fn listing(lines: Vec<String>, max: usize) -> String {
    let mut s = String::new();
    for l in lines.iter().take(max) {
        s.push_str(l);
    }
    if lines.len() > max {
        s.push_str(&format!("more {}\n", lines.len() - max));
    }
    s.push_str("end\n");
    s
}

/// The answer to one command.
pub(crate) fn answer(sh: &Arc<Shared>, cmd: &str) -> String {
    let cmd = match top_command::parse(cmd) {
        Ok(c) => c,
        Err(e) => return format!("error {e}\n"),
    };
    let ok = |r: Result<(), String>| match r {
        Ok(()) => "ok\n".to_string(),
        Err(e) => format!("error {e}\n"),
    };
    match cmd {
        Command::ProfileAll => {
            sh.observe.enable(Target::All);
            "ok\n".into()
        }
        Command::ProfileOff => {
            sh.observe.disable_all();
            "ok\n".into()
        }
        Command::ProfileTrustee(t) if t < sh.n => {
            sh.observe.enable(Target::Trustee(t));
            "ok\n".into()
        }
        Command::ProfileTrustee(t) => format!("error no trustee {t}\n"),
        Command::Reset => {
            counters::reset(sh);
            "ok\n".into()
        }
        Command::Snapshot => counters::collect(sh).to_lines(sh.n),
        Command::Stuck => {
            let mut s = stuck::dump(sh).to_string();
            s.push_str("end\n");
            s
        }
        Command::Settings => settings(sh),
        Command::Dedicated(p) => ok(super::live::set_policy(sh, p).map_err(|e| e.to_string())),
        Command::Adaptive => top_adaptive::answer_list(sh.id),
        Command::Policy { id, policy } => ok(top_adaptive::set_policy(sh.id, id, policy)),
        Command::Follow => top_follow::answer_list(sh.id),
        Command::FollowSet { id, change } => ok(top_follow::change(sh.id, id, &change)),
        Command::Set { trustee, changes } => ok((|| {
            let targets: Vec<usize> = match trustee {
                Some(t) if !sh.is_local(t) => return Err(format!("no trustee {t} in this process")),
                Some(t) => vec![t],
                None => sh.local.clone().collect(),
            };
            // Checked for every target first, so that a refusal changes nothing.
            let new: Vec<_> = targets
                .iter()
                .map(|&t| Ok((t, top_command::apply(sh.tune(t).params(), &changes)?)))
                .collect::<Result<_, String>>()?;
            for (t, p) in new {
                sh.set_trustee_params(Some(t), p).map_err(|e| e.to_string())?;
            }
            Ok(())
        })()),
    }
}

/// The answer to `settings`.
fn settings(sh: &Shared) -> String {
    let policy = match sh.dedicated_policy() {
        DedicatedPolicy::Auto => "auto",
        DedicatedPolicy::Fixed(_) => "fixed",
    };
    let mut s = format!("dedicated {} {policy} {}\n", sh.tuning.dedicated(), sh.local.len());
    for t in sh.local.clone() {
        s.push_str(&top_command::params_line(t, &sh.tune(t).params()));
    }
    s.push_str("end\n");
    s
}
