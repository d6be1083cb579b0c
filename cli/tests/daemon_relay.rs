//! A relay between a real client and the daemon passes the handshake
//! through, then injects records of its own: a record sealed in an earlier
//! session of the same secret (a Start of `/bin/sh -c 'touch MARKER'`), the
//! same Start in the clear, and random bytes. Each ends the connection, nothing runs, the daemon logs
//! the peer and serves the next client.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{Client, Daemon, TempDir};
use gossamer_cli::proto::{ClientMsg, DaemonMsg};

/// Accepts one client, connects it to `daemon`, forwards its handshake
/// record and first message, and copies everything the daemon sends back.
/// Returns the daemon side of the connection and the relay's address as
/// the daemon sees it.
fn relay(listener: TcpListener, daemon: std::net::SocketAddr) -> std::thread::JoinHandle<(TcpStream, String)> {
    std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut d = TcpStream::connect(daemon).unwrap();
        let (mut d2, mut c2) = (d.try_clone().unwrap(), c.try_clone().unwrap());
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut d2, &mut c2);
            let _ = c2.shutdown(std::net::Shutdown::Both);
        });
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for _ in 0..2 {
            let mut len = [0u8; 2];
            c.read_exact(&mut len).unwrap();
            let mut body = vec![0u8; u16::from_be_bytes(len) as usize];
            c.read_exact(&mut body).unwrap();
            d.write_all(&len).unwrap();
            d.write_all(&body).unwrap();
        }
        let me = d.local_addr().unwrap().to_string();
        (d, me)
    })
}

#[test]
fn injected_records_are_refused_and_nothing_runs() {
    let dir = TempDir::new("relay");
    let secret = dir.secret();
    let mut daemon = Daemon::start(
        &[],
        &common::exe(),
        &secret,
        &dir.0.join("daemon.log"),
        &["--allow", "/bin/sh", "--allow", "/usr/bin", "--allow-root", "--log-level", "debug"],
    );
    let marker = dir.0.join("MARKER");
    let shell =
        |file: &std::path::Path| common::start_msg("/bin/sh", &["-c", &format!("touch {}", file.display())], &[]);

    // The same Start, sent in a session of its own, runs: only the session
    // binding stands between the relay and a shell.
    let control = dir.0.join("CONTROL");
    let mut c = Client::connect(daemon.addr);
    assert!(matches!(c.request(&shell(&control)), DaemonMsg::Started { .. }));
    assert!(c.pump(Duration::from_secs(10), |m| matches!(m, DaemonMsg::Exited { .. })));
    assert!(control.exists(), "the control Start did not run:\n{}", daemon.log());
    drop(c);

    // A record captured from an earlier session: sealed by a real client
    // with the secret, right after its Hello.
    let captured = {
        let earlier = Client::connect(daemon.addr);
        let body = gossamer_cli::proto::encode(&shell(&marker)).unwrap();
        let record = earlier.sealer.lock().unwrap().seal(&body).unwrap();
        record
    };
    // The same Start in the clear, framed as a record (what a relay could
    // send when frames were not bound to the session).
    let plain = {
        let body = gossamer_cli::proto::encode(&shell(&marker)).unwrap();
        let mut r = (body.len() as u16).to_be_bytes().to_vec();
        r.extend_from_slice(&body);
        r
    };
    let mut random = vec![0u8, 200];
    random.extend((0..200u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8));

    for (what, injected) in [("a captured record", &captured), ("a plaintext Start", &plain), ("random bytes", &random)]
    {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap().to_string();
        let r = relay(listener, daemon.addr);
        // A real client, through the relay.
        let conn = gossamer_cli::client::connect(&at, 0, common::SECRET.as_bytes());
        let conn = conn.unwrap_or_else(|e| panic!("the real client failed through the relay: {e}"));
        let (mut d, me) = r.join().unwrap();
        d.write_all(injected).unwrap();
        let start = Instant::now();
        assert!(common::closed_within(&mut d, Duration::from_secs(5)), "{what}: the daemon kept the connection");
        eprintln!("{what}: connection ended by the daemon after {:?}", start.elapsed());
        let named = |log: &str| log.lines().any(|l| l.contains("failed authentication") && l.contains(&me));
        let start = Instant::now();
        while !named(&daemon.log()) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(named(&daemon.log()), "{what}: no warning names {me}:\n{}", daemon.log());
        drop(conn);
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(!marker.exists(), "the injected Start ran");
    let log = daemon.log();
    assert_eq!(log.matches("started ranks").count(), 1, "only the control Start may run:\n{log}");

    // Still serving.
    let mut c = Client::connect(daemon.addr);
    assert!(matches!(c.request(&ClientMsg::Status), DaemonMsg::Running { .. }));
    assert!(daemon.alive());
}
