//! One write per reply batch, beside stock memcached: the reply to a
//! multi-key `get`/`gets`/`gat`/`gats` (a missing key in the middle, keys on
//! different shards), to a binary multi-get (`getkq`/`getq` … `noop`), and
//! to a pipelined batch of requests sent in one `write` must reach the
//! client whole, so that the client's first `recv` already holds all of it,
//! as it does with memcached (which writes each reply with one `sendmsg`).
//! Clients that read one segment per reply rely on that.
//!
//! Every request is repeated [`TRIES`] times: a reply split into several
//! writes shows up in the first `recv` only when the client wakes before
//! the later parts arrive, which is a matter of timing.
//!
//! Needs the `memcached` binary; without it the comparison is skipped,
//! unless `GOSSAMER_KV_REQUIRE_MEMCACHED=1` is set, in which case it fails.

mod common;

use std::io::Read;

use common::{bin_req, Proc, Raw, TIMEOUT};
use gossamer_kv::store::shard_of;

/// Repetitions of every request.
const TRIES: usize = 200;
/// gossamer-kv's worker threads (and so shards) in these tests.
const THREADS: usize = 2;

/// Binary opcodes used here.
const GET: u8 = 0x00;
const SET: u8 = 0x01;
const NOOP: u8 = 0x0a;
const GETQ: u8 = 0x09;
const GETK: u8 = 0x0c;
const GETKQ: u8 = 0x0d;

fn server_pair() -> Option<(Proc, Proc)> {
    let threads = THREADS.to_string();
    match Proc::memcached(&["-t", &threads]) {
        Some(mc) => Some((mc, Proc::kv(&["-t", &threads]))),
        None => {
            common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
            None
        }
    }
}

/// Four stored keys, alternating between gossamer-kv's two shards, so that
/// every multi-key request needs the shard of the connection's worker and
/// the other one.
fn keys() -> [String; 4] {
    let mut found: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for i in 0.. {
        let k = format!("key{i}");
        let s = shard_of(k.as_bytes(), THREADS);
        if found[s].len() < 2 {
            found[s].push(k);
        }
        if found.iter().all(|f| f.len() == 2) {
            break;
        }
    }
    let [a, b] = found;
    [a[0].clone(), b[0].clone(), a[1].clone(), b[1].clone()]
}

/// Whether a text reply holds `ends` replies ending in `END`.
fn text_complete(ends: usize) -> impl Fn(&[u8]) -> bool {
    move |b: &[u8]| b.windows(5).filter(|w| w == b"END\r\n").count() >= ends && b.ends_with(b"END\r\n")
}

/// Whether a binary reply ends with a whole `noop` response.
fn binary_complete(b: &[u8]) -> bool {
    let mut at = 0;
    while b.len() >= at + 24 {
        let body = u32::from_be_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        if b.len() < at + 24 + body {
            return false;
        }
        if b[at + 1] == NOOP {
            return at + 24 + body == b.len();
        }
        at += 24 + body;
    }
    false
}

/// Sends `req` with one `write`, then reads once (blocking, bounded by
/// the timeout) and goes on reading until `complete`. Returns what the
/// first `recv` brought, the whole reply, and how many `recv`s it took.
fn first_recv(raw: &mut Raw, req: &[u8], complete: &dyn Fn(&[u8]) -> bool) -> (Vec<u8>, Vec<u8>, usize) {
    raw.send(req);
    let mut buf = vec![0u8; 1 << 20];
    let mut whole = Vec::new();
    let mut first = None;
    for recvs in 1.. {
        let n = raw
            .stream
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("waiting {TIMEOUT:?} for the reply to {:?}: {e}", String::from_utf8_lossy(req)));
        assert!(n > 0, "connection closed in the reply to {:?}", String::from_utf8_lossy(req));
        whole.extend_from_slice(&buf[..n]);
        let first = first.get_or_insert_with(|| buf[..n].to_vec());
        if complete(&whole) {
            return (std::mem::take(first), whole, recvs);
        }
    }
    unreachable!()
}

/// Masks the CAS values of text `VALUE` lines and binary headers.
fn mask(b: &[u8], binary: bool) -> Vec<u8> {
    if binary {
        let mut v = b.to_vec();
        let mut at = 0;
        while v.len() >= at + 24 {
            let body = u32::from_be_bytes(v[at + 8..at + 12].try_into().unwrap()) as usize;
            if v[at + 16..at + 24] != [0; 8] {
                v[at + 16..at + 24].copy_from_slice(&1u64.to_be_bytes());
            }
            at += 24 + body;
        }
        return v;
    }
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(b).split_inclusive("\r\n") {
        let toks: Vec<&str> = line.trim_end_matches("\r\n").split(' ').collect();
        if toks.len() == 5 && toks[0] == "VALUE" {
            out.extend_from_slice(format!("VALUE {} {} {} <cas>\r\n", toks[1], toks[2], toks[3]).as_bytes());
        } else {
            out.extend_from_slice(line.as_bytes());
        }
    }
    out
}

/// How often the first `recv` held the whole reply, the `recv`s all the
/// replies took, and the first split seen (if any).
struct Tally {
    whole: usize,
    recvs: usize,
    split: Option<(Vec<u8>, Vec<u8>)>,
    reply: Vec<u8>,
}

fn tally(raw: &mut Raw, req: &[u8], complete: &dyn Fn(&[u8]) -> bool, binary: bool) -> Tally {
    let mut t = Tally { whole: 0, recvs: 0, split: None, reply: Vec::new() };
    for i in 0..TRIES {
        let (first, whole, recvs) = first_recv(raw, req, complete);
        t.recvs += recvs;
        if first.len() == whole.len() {
            t.whole += 1;
        } else if t.split.is_none() {
            t.split = Some((first, whole.clone()));
        }
        let masked = mask(&whole, binary);
        if i == 0 {
            t.reply = masked;
        } else {
            assert_eq!(masked, t.reply, "the reply to {:?} changed", String::from_utf8_lossy(req));
        }
    }
    t
}

fn shown(b: &[u8], binary: bool) -> String {
    if binary {
        format!("{} bytes {:02x?}", b.len(), &b[..b.len().min(96)])
    } else {
        format!("{:?}", String::from_utf8_lossy(b))
    }
}

/// Runs every request against both servers, checks that the replies are
/// the same and that gossamer-kv's first segment holds the whole reply
/// every time. memcached's count is reported beside it: memcached writes
/// each reply with one `sendmsg` (so its first segment always holds a
/// multi-key reply), but a pipelined batch with one `sendmsg` per `get`,
/// so there its client now and then wakes before the last one arrives;
/// gossamer-kv writes the whole batch at once.
fn compare(setup: &[u8], setup_done: &dyn Fn(&[u8]) -> bool, cases: &[(&str, Vec<u8>, usize)], binary: bool) {
    let Some((mc, kv)) = server_pair() else { return };
    let (mut a, mut b) = (mc.raw(), kv.raw());
    first_recv(&mut a, setup, setup_done);
    first_recv(&mut b, setup, setup_done);
    let mut failures = Vec::new();
    for (name, req, ends) in cases {
        let complete = |b: &[u8]| if binary { binary_complete(b) } else { text_complete(*ends)(b) };
        let want = tally(&mut a, req, &complete, binary);
        let got = tally(&mut b, req, &complete, binary);
        assert_eq!(shown(&got.reply, binary), shown(&want.reply, binary), "{name}: replies differ from memcached's");
        eprintln!(
            "{name}: whole in the first recv: memcached {}/{TRIES}, gossamer-kv {}/{TRIES}; \
             recvs per reply: memcached {:.2}, gossamer-kv {:.2}",
            want.whole,
            got.whole,
            want.recvs as f64 / TRIES as f64,
            got.recvs as f64 / TRIES as f64
        );
        if got.whole != TRIES {
            let split = got.split.as_ref().map(|(f, w)| (shown(f, binary), shown(w, binary)));
            failures.push(format!(
                "{name}: gossamer-kv's first segment held the whole reply in {} of {TRIES} tries, memcached's in \
                 {}; first split (first segment, whole reply): {split:?}",
                got.whole, want.whole
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn text_multi_key_replies_come_in_one_segment() {
    let [k1, k2, k3, k4] = keys();
    let mut setup = Vec::new();
    for (i, k) in [&k1, &k2, &k3, &k4].into_iter().enumerate() {
        setup.extend_from_slice(format!("set {k} {i} 0 6\r\nvalue{i}\r\n").as_bytes());
    }
    setup.extend_from_slice(b"get nokey\r\n");
    let pipelined = format!(
        "get {k1}\r\nget nokey {k2}\r\ngets {k3} {k4}\r\nset extra 0 0 1\r\nx\r\ndelete extra\r\n\
         gat 100 {k2} nokey {k1}\r\nget {k3} {k4} {k1} {k2}\r\n"
    );
    compare(
        &setup,
        &text_complete(1),
        &[
            ("lone get", format!("get {k1}\r\n").into_bytes(), 1),
            ("multi-key get", format!("get {k1} nokey {k2} {k3} {k4}\r\n").into_bytes(), 1),
            ("multi-key gets", format!("gets {k1} nokey {k2}\r\n").into_bytes(), 1),
            ("multi-key gat", format!("gat 100 {k1} nokey {k2}\r\n").into_bytes(), 1),
            ("multi-key gats", format!("gats 0 {k2} nokey {k1} {k4}\r\n").into_bytes(), 1),
            ("pipelined batch", pipelined.into_bytes(), 5),
        ],
        false,
    );
}

#[test]
fn binary_multi_get_replies_come_in_one_segment() {
    let [k1, k2, k3, k4] = keys();
    let flags = 7u32.to_be_bytes();
    let extras = [&flags[..], &[0; 4]].concat();
    let mut setup = Vec::new();
    for (i, k) in [&k1, &k2, &k3, &k4].into_iter().enumerate() {
        setup.extend(bin_req(SET, k.as_bytes(), &extras, format!("value{i}").as_bytes(), i as u32, 0));
    }
    setup.extend(bin_req(NOOP, b"", b"", b"", 99, 0));
    let quiet: Vec<u8> = [
        bin_req(GETKQ, k1.as_bytes(), b"", b"", 1, 0),
        bin_req(GETKQ, b"nokey", b"", b"", 2, 0),
        bin_req(GETKQ, k2.as_bytes(), b"", b"", 3, 0),
        bin_req(GETQ, k3.as_bytes(), b"", b"", 4, 0),
        bin_req(GETQ, k4.as_bytes(), b"", b"", 5, 0),
        bin_req(NOOP, b"", b"", b"", 6, 0),
    ]
    .concat();
    let loud: Vec<u8> = [
        bin_req(GETK, k2.as_bytes(), b"", b"", 1, 0),
        bin_req(GET, b"nokey", b"", b"", 2, 0),
        bin_req(GETK, k1.as_bytes(), b"", b"", 3, 0),
        bin_req(GET, k4.as_bytes(), b"", b"", 4, 0),
        bin_req(GETK, k3.as_bytes(), b"", b"", 5, 0),
        bin_req(NOOP, b"", b"", b"", 6, 0),
    ]
    .concat();
    compare(&setup, &binary_complete, &[("getkq/getq multi-get", quiet, 0), ("getk/get pipelined", loud, 0)], true);
}

/// A reply larger than the output high-water mark is written before it is
/// complete, but must still arrive whole and in order.
#[test]
fn replies_over_the_high_water_mark_arrive_whole() {
    let kv = Proc::kv(&["-t", &THREADS.to_string()]);
    let mut raw = kv.raw();
    let keys = keys();
    let big = 300 * 1024;
    for (i, k) in keys.iter().enumerate() {
        let value = vec![b'a' + i as u8; big];
        raw.send(format!("set {k} 0 0 {big}\r\n").as_bytes());
        raw.send(&value);
        raw.check(b"\r\n", b"STORED\r\n");
    }
    let req = format!("get {} nokey {} {} {}\r\nget {}\r\n", keys[0], keys[1], keys[2], keys[3], keys[1]);
    for _ in 0..5 {
        let (_, whole, _) = first_recv(&mut raw, req.as_bytes(), &text_complete(2));
        let mut want = Vec::new();
        for &i in &[0, 1, 2, 3, usize::MAX, 1] {
            if i == usize::MAX {
                want.extend_from_slice(b"END\r\n");
                continue;
            }
            want.extend_from_slice(format!("VALUE {} 0 {big}\r\n", keys[i]).as_bytes());
            want.extend(vec![b'a' + i as u8; big]);
            want.extend_from_slice(b"\r\n");
        }
        want.extend_from_slice(b"END\r\n");
        assert!(whole == want, "a {} byte reply came back as {} bytes, or out of order", want.len(), whole.len());
    }
}
