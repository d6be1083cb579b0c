//! The daemon's memory stays bounded by what it states per connection:
//! 300 unauthenticated peers announcing maximal records (from 300 source
//! addresses, so the total cap is what holds them), a rank printing
//! 400 MB without a newline through a real session, every byte of which
//! arrives, and the largest message a launcher may send.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{Client, Daemon, TempDir};
use gossamer_cli::proto::{ClientMsg, DaemonMsg, Stream};
use socket2::{Domain, Socket, Type};

/// The stated bounds (cli/README.md, the daemon's module doc), in KiB.
const UNAUTHENTICATED_KIB: u64 = 16;
const SESSION_KIB: u64 = 6 << 10;
const PER_RANK_KIB: u64 = 128;

const BYTES: u64 = 400_000_000;

fn peer_from(i: usize, to: SocketAddr) -> Option<TcpStream> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).ok()?;
    let from: SocketAddr = format!("127.0.{}.{}:0", 10 + i / 250, 1 + i % 250).parse().unwrap();
    s.bind(&from.into()).ok()?;
    s.connect_timeout(&to.into(), Duration::from_secs(2)).ok()?;
    Some(s.into())
}

#[test]
fn big_records_and_endless_lines_stay_within_the_bound() {
    if !common::skip::full("400 MB relayed through a session") {
        return;
    }
    let dir = TempDir::new("memory");
    let secret = dir.secret();
    let mut args = vec!["--allow", "/usr/bin/head"];
    if common::root() {
        args.push("--allow-root");
    }
    let mut daemon = Daemon::start(&[], &common::exe(), &secret, &dir.0.join("daemon.log"), &args);
    // Let it settle, then take its footprint with a session that has run a rank.
    let mut c = Client::connect(daemon.addr);
    assert!(matches!(c.request(&ClientMsg::Status), DaemonMsg::Running { .. }));
    drop(c);
    std::thread::sleep(Duration::from_millis(200));
    let base = daemon.status_field("VmHWM");

    // 300 peers: half announce the largest record there is, half a
    // handshake record of the largest size allowed and stall in it.
    let mut peers = vec![];
    for i in 0..300 {
        let Some(mut s) = peer_from(i, daemon.addr) else { continue };
        if i % 2 == 0 {
            common::write_quiet(&mut s, &[0xff, 0xff]);
            common::write_quiet(&mut s, &[0x55; 4000]);
        } else {
            common::write_quiet(&mut s, &1024u16.to_be_bytes());
            common::write_quiet(&mut s, &[0x55; 1000]);
        }
        peers.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    let held = daemon.status_field("VmRSS");
    eprintln!(
        "FIGURE {} unauthenticated peers connected; daemon VmRSS {held} KiB (VmHWM {base} KiB before them)",
        peers.len()
    );

    // Meanwhile a rank prints 400 MB without a newline.
    let mut c = Client::connect(daemon.addr);
    let start = common::start_msg("/usr/bin/head", &["-c", &BYTES.to_string(), "/dev/zero"], &[]);
    assert!(matches!(c.request(&start), DaemonMsg::Started { .. }), "{}", daemon.log());
    let t = Instant::now();
    let (mut got, mut pieces, mut largest) = (0u64, 0u64, 0usize);
    let mut exited = None;
    let done = c.pump(Duration::from_secs(240), |m| match m {
        DaemonMsg::Output { stream: Stream::Stdout, bytes, .. } => {
            got += bytes.len() as u64;
            pieces += 1;
            largest = largest.max(bytes.len());
            false
        }
        DaemonMsg::Exited { how, .. } => {
            exited = Some(how);
            true
        }
        _ => false,
    });
    let took = t.elapsed();
    drop(peers);
    // The largest message a launcher may send, on the same session.
    let huge = ClientMsg::Check { binary: "/".repeat(gossamer_cli::proto::MAX_FRAME - 64), sha256: [0; 32] };
    match c.request(&huge) {
        DaemonMsg::Refused { reason, .. } => assert!(reason.contains("longer than"), "{reason}"),
        other => panic!("{other:?}"),
    }

    let hwm = daemon.status_field("VmHWM");
    let bound = gossamer_cli::daemon::UNAUTHENTICATED as u64 * UNAUTHENTICATED_KIB + SESSION_KIB + PER_RANK_KIB;
    eprintln!(
        "FIGURE {got} bytes in {pieces} pieces (largest {largest}) in {took:?}; daemon VmHWM {base} KiB before, \
         {hwm} KiB after (+{} KiB; stated bound +{bound} KiB)",
        hwm - base
    );
    assert!(hwm - base <= bound, "the daemon grew by {} KiB, over the stated {bound} KiB", hwm - base);
    assert!(done, "the rank did not finish; {got} bytes arrived\n{}", daemon.log());
    assert!(exited.is_some_and(|h| h.success()), "{exited:?}");
    assert_eq!(got, BYTES, "bytes lost");
    assert!(largest <= gossamer_cli::proto::OUTPUT_CHUNK);
    assert!(daemon.alive());
}
