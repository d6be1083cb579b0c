//! Unit tests of the meta commands on one shard, with an explicit clock:
//! the replies memcached 1.6.18 gives to the same requests (checked
//! against it by `tests/meta.rs`), here without needing memcached.

use crate::protocol::text::{parse, Command, Limits, MetaCommand};
use crate::store::shard::{Shard, ShardConfig};
use crate::store::{Op, Outcome};

const STARTED: i64 = 1_700_000_000;

fn shard() -> Shard {
    Shard::new(ShardConfig {
        index: 0,
        count: 1,
        mem_limit: 1 << 20,
        item_size_max: 1 << 20,
        tail_reclaim: false,
        lru: Default::default(),
    })
}

/// Runs the meta command `line` at time `now` and returns the reply.
fn run(s: &mut Shard, line: &str, now: u32) -> String {
    let limits = Limits { item_size_max: 1 << 20 };
    let p = parse(line.as_bytes(), &limits).expect("complete command");
    let Command::Meta(MetaCommand::Op(op)) = p.command else { panic!("not a meta request: {line:?}") };
    match s.execute(Op::Meta(op), now, STARTED) {
        Outcome::Meta(bytes) => String::from_utf8(bytes).expect("ASCII reply"),
        o => panic!("unexpected outcome {o:?}"),
    }
}

#[test]
fn get_return_flags_in_order() {
    let mut s = shard();
    assert_eq!(run(&mut s, "ms a 2 T100 F7 c\r\nhi\r\n", 10), "HD c1\r\n");
    assert_eq!(run(&mut s, "mg a v t f s k c O9 h l\r\n", 10), "VA 2 t100 f7 s2 ka c1 O9 h0 l0\r\nhi\r\n");
    assert_eq!(run(&mut s, "mg a h l t T30\r\n", 15), "HD h1 l5 t95\r\n");
    assert_eq!(run(&mut s, "mg a t\r\n", 15), "HD t30\r\n");
    assert_eq!(run(&mut s, "mg nope k O1 v\r\n", 15), "EN knope O1\r\n");
    assert_eq!(run(&mut s, "mg nope q\r\n", 15), "");
    assert_eq!(run(&mut s, "mg a q\r\n", 15), "HD\r\n");
    let long = format!("mg a O{}\r\n", "1".repeat(32));
    assert_eq!(run(&mut s, &long, 15), "CLIENT_ERROR opaque token too long\r\n");
}

#[test]
fn vivify_recache_and_stale() {
    let mut s = shard();
    assert_eq!(run(&mut s, "mg v N30 v c t\r\n", 10), "VA 0 c1 t30 W\r\n\r\n");
    assert_eq!(run(&mut s, "mg v N30 v t\r\n", 10), "VA 0 t30 Z\r\n\r\n");
    assert_eq!(run(&mut s, "ms k 1 T10\r\nx\r\n", 10), "HD\r\n");
    assert_eq!(run(&mut s, "mg k R30 t\r\n", 10), "HD t10 W\r\n");
    assert_eq!(run(&mut s, "mg k R30 t\r\n", 10), "HD t10 Z\r\n");
    assert_eq!(run(&mut s, "md k I T60 q\r\n", 10), "");
    assert_eq!(run(&mut s, "mg k c t v\r\n", 10), "VA 1 c3 t60 X W\r\nx\r\n");
    assert_eq!(run(&mut s, "mg k\r\n", 10), "HD Z X\r\n");
    // A CAS value older than the item's stores the value, still stale.
    assert_eq!(run(&mut s, "ms k 1 I C2 c\r\ny\r\n", 10), "HD c4\r\n");
    assert_eq!(run(&mut s, "mg k v t\r\n", 10), "VA 1 t60 Z X\r\ny\r\n");
    assert_eq!(run(&mut s, "ms k 1 C4\r\nz\r\n", 10), "HD\r\n");
    assert_eq!(run(&mut s, "mg k v\r\n", 10), "VA 1\r\nz\r\n");
}

#[test]
fn set_modes_and_cas() {
    let mut s = shard();
    assert_eq!(run(&mut s, "ms k 1 ME c k O1\r\nx\r\n", 10), "HD c1 kk O1\r\n");
    assert_eq!(run(&mut s, "ms k 1 ME c\r\ny\r\n", 10), "NS c0\r\n");
    assert_eq!(run(&mut s, "ms k 1 MA\r\nz\r\n", 10), "HD\r\n");
    assert_eq!(run(&mut s, "ms k 1 MP\r\nw\r\n", 10), "HD\r\n");
    assert_eq!(run(&mut s, "mg k v\r\n", 10), "VA 3\r\nwxz\r\n");
    assert_eq!(run(&mut s, "ms k 1 C1\r\nq\r\n", 10), "EX\r\n");
    assert_eq!(run(&mut s, "ms n 1 C1\r\nq\r\n", 10), "NF\r\n");
    assert_eq!(run(&mut s, "ms n 1 MR q\r\nq\r\n", 10), "NS\r\n");
    assert_eq!(run(&mut s, "ms n 1 q\r\nq\r\n", 10), "");
    assert_eq!(run(&mut s, "ms YQ== 1 b k\r\nq\r\n", 10), "HD kYQ== b\r\n");
    assert_eq!(run(&mut s, "mg a k\r\n", 10), "HD kYQ== b\r\n");
}

#[test]
fn delete_and_arithmetic() {
    let mut s = shard();
    assert_eq!(run(&mut s, "md k q k\r\n", 10), "NF kk\r\n");
    assert_eq!(run(&mut s, "ma n q\r\n", 10), "NF\r\n");
    assert_eq!(run(&mut s, "ma n N0 J10 v t c\r\n", 10), "VA 2 t-1 c1\r\n10\r\n");
    assert_eq!(run(&mut s, "ma n MD D3 v\r\n", 10), "VA 1\r\n7\r\n");
    assert_eq!(run(&mut s, "ma n q v\r\n", 10), "");
    assert_eq!(run(&mut s, "ma n C1 v\r\n", 10), "EX\r\n");
    assert_eq!(run(&mut s, "ma n T100 t v\r\n", 10), "VA 1 t100\r\n9\r\n");
    assert_eq!(run(&mut s, "ms s 3\r\nabc\r\n", 10), "HD\r\n");
    assert_eq!(run(&mut s, "ma s\r\n", 10), "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    assert_eq!(run(&mut s, "md s C1\r\n", 10), "EX\r\n");
    assert_eq!(run(&mut s, "md s q\r\n", 10), "");
    assert_eq!(run(&mut s, "md s\r\n", 10), "NF\r\n");
}

#[test]
fn debug_and_dump() {
    let mut s = shard();
    assert_eq!(run(&mut s, "me k\r\n", 10), "EN\r\n");
    assert_eq!(run(&mut s, "ms k 2 T100 F3\r\nhi\r\n", 10), "HD\r\n");
    assert_eq!(run(&mut s, "me k\r\n", 15), "ME k exp=-95 la=5 cas=1 fetch=no cls=1 size=66\r\n");
    assert_eq!(run(&mut s, "ms dg== 1 b\r\nx\r\n", 15), "HD\r\n");
    assert_eq!(run(&mut s, "me dg== b\r\n", 15), "ME dg== exp=-1 la=0 cas=2 fetch=no cls=1 size=61\r\n");
    let Outcome::Meta(dump) = s.execute(Op::Dump { classes: None }, 15, STARTED) else { panic!("no dump") };
    let expected = format!(
        "key=k exp={} la={} cas=1 fetch=no cls=1 size=66\nkey=v exp=-1 la={} cas=2 fetch=no cls=1 size=61\n",
        STARTED + 110,
        STARTED + 10,
        STARTED + 15
    );
    assert_eq!(String::from_utf8(dump).expect("ASCII"), expected);
    let Outcome::Meta(none) = s.execute(Op::Dump { classes: Some(vec![2]) }, 15, STARTED) else { panic!("no dump") };
    assert!(none.is_empty());
    assert_eq!(s.stats(15).cmd_meta, 3);
}
