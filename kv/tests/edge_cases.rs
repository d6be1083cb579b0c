//! Raw-socket tests of edge cases and error replies, with the bytes
//! memcached 1.6 sends written out (so they run without memcached too).

mod common;

use std::time::Duration;

use common::{bin_req, Proc};

#[test]
fn text_error_replies() {
    let p = Proc::kv(&["-t", "2"]);
    let mut c = p.raw();
    c.check(b"foo\r\n", b"ERROR\r\n");
    c.check(b"\r\n", b"ERROR\r\n");
    c.check(b"get\r\n", b"ERROR\r\n");
    c.check(b"set a 0 0\r\n", b"ERROR\r\n");
    c.check(format!("get {}\r\n", "k".repeat(251)).as_bytes(), b"CLIENT_ERROR bad command line format\r\n");
    c.check(b"set a 0 0 -1\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.check(b"set a 0 0 1\r\nxyz\r\n", b"CLIENT_ERROR bad data chunk\r\nERROR\r\n");
    c.check(b"incr a x\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n");
    c.check(b"touch a x\r\n", b"CLIENT_ERROR invalid exptime argument\r\n");
    c.check(b"flush_all x\r\n", b"CLIENT_ERROR invalid exptime argument\r\n");
    c.check(b"delete a 5\r\n", b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n");
    c.check(
        b"set n 0 0 1\r\nx\r\nincr n 1\r\n",
        b"STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
    c.check(b"stats detail\r\n", b"CLIENT_ERROR usage: stats detail on|off|dump\r\n");
    c.check(b"shutdown\r\n", b"ERROR: shutdown not enabled\r\n");
}

#[test]
fn too_large_values_are_swallowed() {
    let p = Proc::kv(&["-t", "2", "-I", "2k"]);
    let mut c = p.raw();
    c.check(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n");
    // The data of a refused set is skipped, even when it arrives later (the
    // refusal comes once it is skipped, as with memcached), and the old
    // item is gone.
    c.send(b"set a 0 0 5000\r\n");
    c.send(&[b'z'; 3000]);
    c.send(&[b'z'; 2000]);
    c.check(b"\r\nget a\r\n", b"SERVER_ERROR object too large for cache\r\nEND\r\n");
    // With noreply the error is silent.
    c.send(b"set a 0 0 5000 noreply\r\n");
    c.send(&[b'z'; 5002]);
    c.check(b"version\r\n", b"VERSION ");
}

#[test]
fn pipelined_requests_answer_in_order() {
    let p = Proc::kv(&["-t", "2"]);
    let mut c = p.raw();
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..2000 {
        req.extend_from_slice(format!("set key:{i} {i} 0 {}\r\n{i}\r\n", i.to_string().len()).as_bytes());
        want.extend_from_slice(b"STORED\r\n");
    }
    for i in 0..2000 {
        req.extend_from_slice(format!("get key:{i} key:{}\r\n", i + 1).as_bytes());
        want.extend_from_slice(format!("VALUE key:{i} {i} {}\r\n{i}\r\n", i.to_string().len()).as_bytes());
        if i + 1 < 2000 {
            let j = i + 1;
            want.extend_from_slice(format!("VALUE key:{j} {j} {}\r\n{j}\r\n", j.to_string().len()).as_bytes());
        }
        want.extend_from_slice(b"END\r\n");
    }
    c.check(&req, &want);
}

#[test]
fn input_in_single_bytes() {
    let p = Proc::kv(&["-t", "2"]);
    let mut c = p.raw();
    for &b in b"set drip 3 0 4\r\nabcd\r\nget drip\r\n" {
        c.send(&[b]);
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(c.recv_until(b"END\r\n"), b"STORED\r\nVALUE drip 3 4\r\nabcd\r\nEND\r\n");
}

#[test]
fn half_closed_client_gets_its_replies() {
    let p = Proc::kv(&["-t", "2"]);
    let mut c = p.raw();
    c.send(b"set hc 0 0 2\r\nhi\r\nget hc\r\n");
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let (got, closed) = c.recv_quiet(Duration::from_secs(5));
    assert_eq!(got, b"STORED\r\nVALUE hc 0 2\r\nhi\r\nEND\r\n");
    assert!(closed);
}

#[test]
fn closing_inputs() {
    let p = Proc::kv(&["-t", "2"]);
    let mut c = p.raw();
    c.check(b"version\r\n", b"VERSION ");
    c.recv_until(b"\r\n");
    c.send(b"quit\r\n");
    c.expect_closed();
    let mut c = p.raw();
    c.send(&[b'x'; 3000]);
    c.expect_closed();
    let mut c = p.raw();
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    c.expect_closed();
}

#[test]
fn binary_errors_and_quiet_commands() {
    let p = Proc::kv(&["-t", "2"]);
    let mut c = p.raw();
    let flags = [0, 0, 0, 9, 0, 0, 0, 0];
    c.send(&bin_req(0x11, b"q", &flags, b"v", 1, 0)); // setq: silent
    c.send(&bin_req(0x09, b"absent", b"", b"", 2, 0)); // getq miss: silent
    c.send(&bin_req(0x09, b"q", b"", b"", 3, 0)); // getq hit
    c.send(&bin_req(0x12, b"q", &flags, b"v", 4, 0)); // addq on a present key: error
    c.send(&bin_req(0x0a, b"", b"", b"", 5, 0));
    let hit = c.recv_bin();
    assert_eq!(
        (hit.opcode, hit.status, hit.opaque, hit.extras.as_slice(), hit.value.as_slice()),
        (0x09, 0, 3, &[0, 0, 0, 9][..], &b"v"[..])
    );
    let err = c.recv_bin();
    assert_eq!((err.opcode, err.status, err.opaque, err.value.as_slice()), (0x12, 2, 4, &b"Data exists for key."[..]));
    let noop = c.recv_bin();
    assert_eq!((noop.opcode, noop.opaque), (0x0a, 5));

    // An unknown opcode is answered and its body skipped.
    c.send(&bin_req(0x50, b"", b"", b"body", 6, 0));
    c.send(&bin_req(0x0a, b"", b"", b"", 7, 0));
    let r = c.recv_bin();
    assert_eq!((r.status, r.value.as_slice()), (0x81, &b"Unknown command"[..]));
    assert_eq!(c.recv_bin().opaque, 7);

    // A value over the limit: E2BIG once the body is skipped (without
    // being buffered).
    let mut big = bin_req(0x01, b"big", &flags, b"", 8, 0);
    big[8..12].copy_from_slice(&(3 + 8 + 2_000_000u32).to_be_bytes());
    c.send(&big);
    c.send(&vec![0u8; 2_000_000]);
    let r = c.recv_bin();
    assert_eq!((r.status, r.value.as_slice()), (3, &b"Too large."[..]));
    c.send(&bin_req(0x0a, b"", b"", b"", 9, 0));
    assert_eq!(c.recv_bin().opaque, 9);

    // Malformed lengths: invalid arguments, then the connection closes.
    c.send(&bin_req(0x00, b"k", b"xxxx", b"", 10, 0));
    let r = c.recv_bin();
    assert_eq!((r.status, r.value.as_slice()), (4, &b"Invalid arguments"[..]));
    c.expect_closed();

    // A wrong magic byte in the middle closes the connection.
    let mut c = p.raw();
    c.send(&bin_req(0x0a, b"", b"", b"", 1, 0));
    assert_eq!(c.recv_bin().opaque, 1);
    let mut bad = bin_req(0x0a, b"", b"", b"", 2, 0);
    bad[0] = 0x81;
    c.send(&bad);
    c.expect_closed();
}

#[test]
fn binary_incr_creates_and_counts() {
    let p = Proc::kv(&["-t", "2"]);
    let mut c = p.raw();
    let extras =
        |delta: u64, init: u64, exp: u32| [&delta.to_be_bytes()[..], &init.to_be_bytes(), &exp.to_be_bytes()].concat();
    c.send(&bin_req(0x05, b"n", &extras(1, 10, 0), b"", 1, 0));
    let r = c.recv_bin();
    assert_eq!((r.status, r.value.as_slice()), (0, &10u64.to_be_bytes()[..]));
    c.send(&bin_req(0x05, b"n", &extras(5, 10, 0), b"", 2, 0));
    assert_eq!(c.recv_bin().value, 15u64.to_be_bytes());
    c.send(&bin_req(0x06, b"absent", &extras(1, 0, u32::MAX), b"", 3, 0));
    assert_eq!(c.recv_bin().status, 1);
}
