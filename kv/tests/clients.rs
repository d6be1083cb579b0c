//! An unmodified third-party client library (the `memcache` crate) against
//! the server, over the text protocol (`?protocol=ascii`) and the binary
//! protocol (its default).

mod common;

use std::collections::HashMap;
use std::thread;
use std::time::Duration;

use common::Proc;

fn client(p: &Proc, ascii: bool) -> memcache::Client {
    memcache::connect(p.url(ascii)).expect("connect with the memcache crate")
}

/// What every memcached client relies on.
fn exercise(p: &Proc, ascii: bool) {
    let c = client(p, ascii);
    c.flush().unwrap();
    assert!(!c.version().unwrap().is_empty());

    c.set("foo", "bar", 0).unwrap();
    assert_eq!(c.get::<String>("foo").unwrap().as_deref(), Some("bar"));
    c.append("foo", "baz").unwrap();
    c.prepend("foo", "<").unwrap();
    assert_eq!(c.get::<String>("foo").unwrap().as_deref(), Some("<barbaz"));

    // The crate reports NOT_STORED as an error in binary only; either way
    // nothing may change.
    let refused = [c.add("foo", "x", 0), c.replace("absent", "x", 0), c.append("absent", "x")];
    if !ascii {
        assert!(refused.iter().all(Result::is_err), "{refused:?}");
    }
    assert_eq!(c.get::<String>("foo").unwrap().as_deref(), Some("<barbaz"));
    assert_eq!(c.get::<String>("absent").unwrap(), None);
    c.add("fresh", "x", 0).unwrap();
    c.replace("fresh", "y", 0).unwrap();
    assert_eq!(c.get::<String>("fresh").unwrap().as_deref(), Some("y"));

    assert!(c.delete("foo").unwrap());
    assert!(!c.delete("foo").unwrap());
    assert_eq!(c.get::<String>("foo").unwrap(), None);

    c.set("counter", 40, 0).unwrap();
    assert_eq!(c.increment("counter", 2).unwrap(), 42);
    assert_eq!(c.decrement("counter", 50).unwrap(), 0);
    // Like memcached, a shorter result is padded in place with spaces.
    assert_eq!(c.get::<String>("counter").unwrap().as_deref(), Some("0 "));

    let keys: Vec<String> = (0..50).map(|i| format!("multi:{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        c.set(k, i as u64, 0).unwrap();
    }
    let refs: Vec<&str> = keys.iter().map(String::as_str).chain(["multi:absent"]).collect();
    let got: HashMap<String, u64> = c.gets(&refs).unwrap();
    assert_eq!(got.len(), 50);
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(got[k], i as u64);
    }

    // Compare-and-swap with the CAS value from a get.
    c.set("caskey", "one", 0).unwrap();
    let got: HashMap<String, (Vec<u8>, u32, Option<u64>)> = c.gets(&["caskey"]).unwrap();
    let cas = got["caskey"].2.expect("a CAS value");
    assert!(c.cas("caskey", "two", 0, cas).unwrap());
    assert!(!c.cas("caskey", "three", 0, cas).unwrap(), "stale CAS value");
    assert_eq!(c.get::<String>("caskey").unwrap().as_deref(), Some("two"));

    assert!(c.touch("caskey", 100).unwrap());
    assert!(!c.touch("absent", 100).unwrap());

    // Flags survive.
    let (v, flags, _): (Vec<u8>, u32, Option<u64>) = {
        c.set("flagged", "v", 0).unwrap();
        c.get("flagged").unwrap().unwrap()
    };
    assert_eq!((v.as_slice(), flags), (&b"v"[..], 0));

    // Large values, binary-safe.
    let big: Vec<u8> = (0..600_000u32).map(|i| (i * 7 % 251) as u8).collect();
    c.set("big", big.as_slice(), 0).unwrap();
    assert_eq!(c.get::<Vec<u8>>("big").unwrap().as_deref(), Some(big.as_slice()));

    let stats = c.stats().unwrap();
    let (_, s) = &stats[0];
    // The crate's text-protocol stats parser returns nothing (with
    // memcached too); the binary one returns the stats.
    if !ascii {
        assert!(s.contains_key("curr_items") && s.contains_key("get_hits"), "{s:?}");
    }

    c.flush().unwrap();
    assert_eq!(c.get::<String>("fresh").unwrap(), None);
}

#[test]
fn text_protocol_client() {
    let p = Proc::kv(&["-t", "2"]);
    exercise(&p, true);
}

#[test]
fn binary_protocol_client() {
    let p = Proc::kv(&["-t", "2"]);
    exercise(&p, false);
}

/// The same expectations hold for stock memcached (where installed), so
/// they test the server, not the client library's quirks.
#[test]
fn same_expectations_hold_for_memcached() {
    let Some(p) = Proc::memcached(&[]) else {
        common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
        return;
    };
    exercise(&p, true);
    exercise(&p, false);
}

#[test]
fn clients_with_one_thread_and_with_more_threads_than_cores() {
    for threads in ["1", "5"] {
        let p = Proc::kv(&["-t", threads]);
        exercise(&p, true);
        exercise(&p, false);
    }
}

#[test]
fn clients_with_dedicated_trustees() {
    let p = Proc::kv(&["-t", "3", "--dedicated-trustees", "1"]);
    exercise(&p, true);
    exercise(&p, false);
}

#[test]
fn clients_with_dedicated_trustees_picked_by_the_controller() {
    let p = Proc::kv(&["-t", "3", "--dedicated-trustees", "auto"]);
    exercise(&p, true);
    exercise(&p, false);
}

#[test]
fn expiry_through_clients() {
    let p = Proc::kv(&["-t", "2"]);
    for ascii in [true, false] {
        let c = client(&p, ascii);
        c.set("short", "v", 1).unwrap();
        c.set("long", "v", 100).unwrap();
        assert!(c.get::<String>("short").unwrap().is_some());
    }
    thread::sleep(Duration::from_millis(2200));
    for ascii in [true, false] {
        let c = client(&p, ascii);
        assert_eq!(c.get::<String>("short").unwrap(), None);
        assert!(c.get::<String>("long").unwrap().is_some());
    }
}

#[test]
fn both_protocols_share_one_table() {
    let p = Proc::kv(&["-t", "2"]);
    let text = client(&p, true);
    let bin = client(&p, false);
    text.set("shared", "from text", 0).unwrap();
    assert_eq!(bin.get::<String>("shared").unwrap().as_deref(), Some("from text"));
    bin.set("shared", "from binary", 0).unwrap();
    assert_eq!(text.get::<String>("shared").unwrap().as_deref(), Some("from binary"));
}

#[test]
fn concurrent_clients_see_every_increment() {
    let p = Proc::kv(&["-t", "2"]);
    client(&p, true).set("hits", 0, 0).unwrap();
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let url = p.url(i % 2 == 0);
            thread::spawn(move || {
                let c = memcache::connect(url).unwrap();
                for _ in 0..300 {
                    c.increment("hits", 1).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(client(&p, false).get::<u64>("hits").unwrap(), Some(1800));
}
