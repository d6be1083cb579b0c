//! The cap on authenticated sessions: with all of them open (and kept
//! alive), the next launcher is told so and turned away; once one closes,
//! a launcher is welcome again.

mod common;

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Client, Daemon, TempDir};
use gossamer_cli::daemon::SESSIONS;
use gossamer_cli::proto::{self, ClientMsg, DaemonMsg};
use gossamer_session::Sealer;

/// What the heartbeat thread needs for one session.
type Beater = (TcpStream, Arc<Mutex<Sealer>>);

#[test]
fn sessions_over_the_cap_are_refused_and_the_daemon_recovers() {
    let dir = TempDir::new("caps");
    let secret = dir.secret();
    let args: &[&str] = if common::root() { &["--allow-root"] } else { &[] };
    let daemon = Daemon::start(&[], &common::exe(), &secret, &dir.0.join("daemon.log"), args);
    // Heartbeats for every session from the moment it opens, so none falls
    // silent while the others are still being opened (on a busy machine,
    // opening all of them can take longer than the daemon's silence window).
    let stop = Arc::new(AtomicBool::new(false));
    let beaters: Arc<Mutex<Vec<Beater>>> = Arc::new(Mutex::new(Vec::new()));
    let beat = {
        let (stop, beaters) = (stop.clone(), beaters.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for (w, sealer) in beaters.lock().unwrap().iter_mut() {
                    let _ = proto::send(w, &mut sealer.lock().unwrap(), &ClientMsg::Heartbeat);
                }
                std::thread::sleep(Duration::from_millis(proto::HEARTBEAT_MS));
            }
        })
    };
    let before = daemon.status_field("VmRSS");
    let mut open: Vec<Client> = (0..SESSIONS)
        .map(|_| {
            let c = Client::connect(daemon.addr);
            beaters.lock().unwrap().push(c.beater());
            c
        })
        .collect();
    let after = daemon.status_field("VmRSS");
    eprintln!(
        "FIGURE {SESSIONS} idle sessions: daemon VmRSS {before} -> {after} KiB ({} KiB each)",
        (after.saturating_sub(before)) / SESSIONS as u64
    );
    let (_, answer) = Client::hello(daemon.addr);
    match answer {
        Some(DaemonMsg::Refused { reason, .. }) => assert!(reason.contains("sessions"), "{reason}"),
        other => panic!("session {} was not refused: {other:?}", SESSIONS + 1),
    }
    // One closes; a launcher is welcome again (bounded wait for the close to be seen).
    let gone = open.pop().unwrap();
    gone.stream.shutdown(std::net::Shutdown::Both).unwrap();
    drop(gone);
    let start = Instant::now();
    loop {
        match Client::hello(daemon.addr) {
            (_, Some(DaemonMsg::Welcome { .. })) => break,
            (_, other) => {
                assert!(start.elapsed() < Duration::from_secs(5), "still refused: {other:?}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    beat.join().unwrap();
    let mut c = open.pop().unwrap();
    assert!(matches!(c.request(&ClientMsg::Status), DaemonMsg::Running { .. }));
}
