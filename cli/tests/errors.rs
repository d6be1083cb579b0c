//! The launcher's errors for the mistakes a first run makes: a port where
//! no daemon listens, and a port where some other service answers. Each
//! must say what is wrong and what to do.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{exe, free_port, TempDir};

/// Runs the `gossamer` command with `args`, killed after 30 s.
fn gossamer(args: &[&str]) -> Output {
    let mut child = Command::new(exe())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gossamer");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait for gossamer").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gossamer {args:?} did not end within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("gossamer's output")
}

/// A server on a free local port that answers every connection once with
/// `reply` and closes it; it serves until the test's process ends.
fn impostor(reply: &'static [u8]) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 256];
            let _ = s.read(&mut buf);
            let _ = s.write_all(reply);
        }
    });
    port
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn hosts_against_a_web_server_says_it_is_not_a_daemon() {
    let dir = TempDir::new("errors-http");
    let secret = dir.secret();
    let port = impostor(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    let host = format!("127.0.0.1:{port}");
    let o = gossamer(&["hosts", "--hosts", &host, "--secret-file", secret.to_str().unwrap()]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    let all = format!("{out}{err}");
    assert!(!o.status.success(), "{all}");
    assert!(all.contains("is not a gossamer daemon"), "{all}");
    assert!(all.contains("an HTTP server"), "{all}");
    assert!(all.contains("--daemon-port"), "names the fix: {all}");
    assert!(!all.contains("exceeds the limit"), "{all}");
}

#[test]
fn run_without_a_daemon_says_how_to_start_one() {
    let dir = TempDir::new("errors-refused");
    let secret = dir.secret();
    let port = free_port().to_string();
    // No --hosts: the launcher tries this machine, where nothing listens.
    let o = gossamer(&[
        "run",
        "--secret-file",
        secret.to_str().unwrap(),
        "--daemon-port",
        &port,
        "-n",
        "1",
        "--",
        "/bin/true",
    ]);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains(&format!("no gossamer daemon is listening at 127.0.0.1:{port}")), "{err}");
    assert!(err.contains("gossamer daemon --listen"), "says how to start one: {err}");
    assert!(err.contains("--hosts"), "says how to name other hosts: {err}");
}

#[test]
fn run_against_a_service_that_hangs_up_names_both_causes() {
    let dir = TempDir::new("errors-closed");
    let secret = dir.secret();
    let port = impostor(b"");
    let host = format!("127.0.0.1:{port}");
    let o =
        gossamer(&["run", "--hosts", &host, "--secret-file", secret.to_str().unwrap(), "-n", "1", "--", "/bin/true"]);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    // A daemon that does not know our secret hangs up too: both are named.
    assert!(err.contains("does not know our secret"), "{err}");
    assert!(err.contains("not a gossamer daemon"), "{err}");
}
