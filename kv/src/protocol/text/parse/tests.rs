//! Tests of the text parser: memcached's replies to bad input, and
//! property tests over arbitrary bytes and arbitrary splits.

use super::*;
use proptest::prelude::*;

const LIMITS: Limits = Limits { item_size_max: 1 << 20 };

fn one(input: &[u8]) -> Parsed<'_> {
    parse(input, &LIMITS).expect("complete command")
}

fn reply_of(input: &[u8]) -> (&'static [u8], bool) {
    match one(input).command {
        Command::Reply { text, noreply } => (text, noreply),
        c => panic!("expected a reply, got {c:?}"),
    }
}

#[test]
fn get_keys() {
    let p = one(b"get a b  c\r\n");
    assert_eq!(p.command, Command::Get { keys: b"a b  c", cas: false, touch: None });
    assert_eq!(p.consumed, 12);
    assert_eq!(one(b"gets a\n").command, Command::Get { keys: b"a", cas: true, touch: None });
    assert_eq!(one(b"gat 10 a\r\n").command, Command::Get { keys: b"a", cas: false, touch: Some(10) });
    assert_eq!(one(b"gats 10\r\n").command, Command::Get { keys: b"", cas: true, touch: Some(10) });
    assert_eq!(reply_of(b"gat x a\r\n").0, replies::BAD_EXPTIME);
    let long = format!("get a {} b\r\n", "k".repeat(251));
    assert_eq!(reply_of(long.as_bytes()).0, replies::BAD_FORMAT);
    let ok = format!("get {}\r\n", "k".repeat(250));
    assert!(matches!(one(ok.as_bytes()).command, Command::Get { .. }));
}

#[test]
fn unknown_and_short() {
    for input in
        [&b"foo\r\n"[..], b"\r\n", b"get\r\n", b"GET a\r\n", b"g a\r\n", b"set a 0 0\r\n", b"set a 0 0 1 2 3\r\n"]
    {
        assert_eq!(reply_of(input).0, replies::ERROR, "{:?}", String::from_utf8_lossy(input));
    }
    assert_eq!(one(b"mn\r\n").command, Command::Meta(crate::protocol::text::MetaCommand::NoOp));
    assert!(matches!(one(b"shutdown\r\n").command, Command::Admin { .. }));
}

#[test]
fn stores() {
    let p = one(b"set k 5 10 3\r\nabc\r\nget k\r\n");
    assert_eq!(
        p.command,
        Command::Store { mode: StoreMode::Set, key: b"k", flags: 5, exptime: 10, cas: 0, data: b"abc", noreply: false }
    );
    assert_eq!(p.consumed, 19);
    assert!(parse(b"set k 0 0 3\r\nab", &LIMITS).is_none());
    let p = one(b"cas k 0 0 1 99 noreply\r\nx\r\n");
    assert_eq!(
        p.command,
        Command::Store { mode: StoreMode::Cas, key: b"k", flags: 0, exptime: 0, cas: 99, data: b"x", noreply: true }
    );
    // Flags and lengths truncate like memcached's.
    assert!(matches!(one(b"set k 4294967296 0 1\r\nx\r\n").command, Command::Store { flags: 0, .. }));
    assert!(matches!(one(b"set k 0 0 4294967297\r\nx\r\n").command, Command::Store { data: b"x", .. }));
    // An extra token that is not noreply is ignored.
    assert!(matches!(one(b"set k 0 0 1 2\r\nx\r\n").command, Command::Store { noreply: false, .. }));
}

#[test]
fn bad_stores() {
    assert_eq!(reply_of(b"set k 0 0 -1\r\n"), (replies::BAD_FORMAT, false));
    assert_eq!(reply_of(b"set k abc 0 1\r\n"), (replies::BAD_FORMAT, false));
    assert_eq!(reply_of(b"set k -1 0 1\r\n"), (replies::BAD_FORMAT, false));
    assert_eq!(reply_of(b"cas k 0 0 1 abc\r\n"), (replies::BAD_FORMAT, false));
    assert_eq!(reply_of(b"cas k 0 0 1\r\n"), (replies::ERROR, false));
    let long = format!("set {} 0 0 1 noreply\r\n", "k".repeat(251));
    assert_eq!(reply_of(long.as_bytes()), (replies::BAD_FORMAT, true));
    // A bad data chunk consumes the declared length plus two.
    let p = one(b"set a 0 0 1\r\nxyz\r\n");
    assert_eq!(p.command, Command::Reply { text: replies::BAD_CHUNK, noreply: false });
    assert_eq!(p.consumed, 16);
}

#[test]
fn too_large_swallows() {
    let p = one(b"set a 0 0 2000000\r\n");
    assert_eq!(p.command, Command::TooLarge { key: b"a", unlink: true, noreply: false });
    assert_eq!((p.consumed, p.swallow), (19, 2_000_002));
    let p = one(b"add a 0 0 1048517 noreply\r\n");
    assert_eq!(p.command, Command::TooLarge { key: b"a", unlink: false, noreply: true });
    assert!(parse(b"set a 0 0 1048516\r\n", &LIMITS).is_none());
}

#[test]
fn delete_variants() {
    assert_eq!(one(b"delete a\r\n").command, Command::Delete { key: b"a", noreply: false });
    assert_eq!(one(b"delete a 0\r\n").command, Command::Delete { key: b"a", noreply: false });
    assert_eq!(one(b"delete a noreply\r\n").command, Command::Delete { key: b"a", noreply: true });
    assert_eq!(one(b"delete a 0 noreply\r\n").command, Command::Delete { key: b"a", noreply: true });
    assert_eq!(reply_of(b"delete a 5\r\n"), (replies::DELETE_USAGE, false));
    assert_eq!(reply_of(b"delete a b c\r\n"), (replies::DELETE_USAGE, false));
    assert_eq!(reply_of(b"delete\r\n"), (replies::ERROR, false));
}

#[test]
fn arith_touch_flush_verbosity() {
    assert_eq!(one(b"incr a 5\r\n").command, Command::Arith { key: b"a", incr: true, delta: 5, noreply: false });
    assert_eq!(
        one(b"decr a 5 noreply\r\n").command,
        Command::Arith { key: b"a", incr: false, delta: 5, noreply: true }
    );
    assert_eq!(reply_of(b"incr a -1\r\n"), (replies::BAD_DELTA, false));
    assert_eq!(reply_of(b"incr a 18446744073709551616\r\n"), (replies::BAD_DELTA, false));
    assert_eq!(reply_of(b"incr a\r\n"), (replies::ERROR, false));
    assert_eq!(one(b"touch a 10\r\n").command, Command::Touch { key: b"a", exptime: 10, noreply: false });
    assert_eq!(reply_of(b"touch a x\r\n"), (replies::BAD_EXPTIME, false));
    assert_eq!(one(b"flush_all\r\n").command, Command::FlushAll { delay: 0, noreply: false });
    assert_eq!(one(b"flush_all 10 noreply\r\n").command, Command::FlushAll { delay: 10, noreply: true });
    assert_eq!(one(b"flush_all noreply\r\n").command, Command::FlushAll { delay: 0, noreply: true });
    assert_eq!(reply_of(b"flush_all abc\r\n"), (replies::BAD_EXPTIME, false));
    assert_eq!(reply_of(b"flush_all 1 2 3\r\n"), (replies::ERROR, false));
    assert_eq!(one(b"verbosity 1\r\n").command, Command::Verbosity { level: 1, noreply: false });
    assert_eq!(reply_of(b"verbosity x\r\n"), (replies::BAD_FORMAT, false));
    assert_eq!(reply_of(b"verbosity\r\n"), (replies::ERROR, false));
    assert_eq!(one(b"version foo\r\n").command, Command::Version);
    assert_eq!(one(b"quit\r\n").command, Command::Quit);
}

#[test]
fn stats_variants() {
    assert_eq!(one(b"stats\r\n").command, Command::Stats(StatsKind::General));
    assert_eq!(one(b"stats items foo\r\n").command, Command::Stats(StatsKind::Items));
    assert_eq!(one(b"stats reset\r\n").command, Command::Stats(StatsKind::Reset));
    assert_eq!(one(b"stats conns\r\n").command, Command::Stats(StatsKind::Conns));
    assert_eq!(reply_of(b"stats detail\r\n").0, replies::DETAIL_USAGE);
    assert!(matches!(one(b"stats detail on\r\n").command, Command::Admin { .. }));
    assert_eq!(reply_of(b"stats foo\r\n").0, replies::ERROR);
}

#[test]
fn stats_cachedump_checks_as_memcached() {
    let dump = |class, limit| Command::Lru(LruCommand::CacheDump { class, limit });
    assert_eq!(one(b"stats cachedump 1 100\r\n").command, dump(1, 100));
    assert_eq!(one(b"stats cachedump 63 0 extra\r\n").command, dump(63, 0));
    assert_eq!(reply_of(b"stats cachedump\r\n").0, b"CLIENT_ERROR bad command line\r\n");
    assert_eq!(reply_of(b"stats cachedump 1\r\n").0, b"CLIENT_ERROR bad command line\r\n");
    assert_eq!(reply_of(b"stats cachedump x 1\r\n").0, replies::BAD_FORMAT);
    assert_eq!(reply_of(b"stats cachedump 1 -1\r\n").0, replies::BAD_FORMAT);
    assert_eq!(reply_of(b"stats cachedump 64 1\r\n").0, b"CLIENT_ERROR Illegal slab id\r\n");
}

#[test]
fn closing_lines() {
    assert_eq!(one(b"GET / HTTP/1.1\r\n").command, Command::Close);
    assert_eq!(one(&[b'x'; 3000]).command, Command::Close);
    let mut get = b"get ".to_vec();
    get.extend(std::iter::repeat_n(b'k', 3000));
    assert!(parse(&get, &LIMITS).is_none());
    // With the newline present, a long line is just an unknown command.
    let mut long = vec![b'x'; 9000];
    long.extend_from_slice(b"\r\n");
    assert_eq!(reply_of(&long).0, replies::ERROR);
}

#[test]
fn bare_newlines_and_carriage_returns() {
    assert_eq!(one(b"get a\n").command, Command::Get { keys: b"a", cas: false, touch: None });
    assert_eq!(one(b"get a\r\r\n").command, Command::Get { keys: b"a\r", cas: false, touch: None });
    assert_eq!(reply_of(b"\r\r\n").0, replies::ERROR);
}

/// Parses a whole stream, feeding it in the given piece sizes, and returns
/// a printable trace of the commands.
fn trace(stream: &[u8], pieces: &[usize]) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    let mut swallow = 0usize;
    let mut sizes = pieces.iter().cycle();
    loop {
        let take = (*sizes.next().unwrap()).max(1).min(stream.len() - fed);
        buf.extend_from_slice(&stream[fed..fed + take]);
        fed += take;
        loop {
            let skip = swallow.min(buf.len());
            buf.drain(..skip);
            swallow -= skip;
            if swallow > 0 {
                break;
            }
            let Some(p) = parse(&buf, &LIMITS) else { break };
            out.push(format!("{:?}", p.command));
            let close = p.command == Command::Close;
            swallow = p.swallow;
            buf.drain(..p.consumed);
            if close {
                return out;
            }
        }
        if fed == stream.len() {
            return out;
        }
    }
}

fn arb_command() -> impl Strategy<Value = Vec<u8>> {
    let key = "[a-z0-9:]{1,12}";
    prop_oneof![
        key.prop_map(|k| format!("get {k}\r\n").into_bytes()),
        (key, key).prop_map(|(a, b)| format!("gets {a} {b}\r\n").into_bytes()),
        (key, any::<u32>(), "[a-z]{0,40}")
            .prop_map(|(k, f, v)| format!("set {k} {f} 0 {}\r\n{v}\r\n", v.len()).into_bytes()),
        (key, "[a-z]{0,10}").prop_map(|(k, v)| format!("append {k} 0 0 {} noreply\r\n{v}\r\n", v.len()).into_bytes()),
        (key, any::<u64>()).prop_map(|(k, d)| format!("incr {k} {d}\r\n").into_bytes()),
        key.prop_map(|k| format!("delete {k}\r\n").into_bytes()),
        Just(b"version\r\n".to_vec()),
        Just(b"bogus command\r\n".to_vec()),
        Just(b"set big 0 0 2000000\r\n".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..30),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Arbitrary bytes never panic, and a result never claims more input
    /// than there is.
    #[test]
    fn arbitrary_bytes(input in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Some(p) = parse(&input, &LIMITS) {
            prop_assert!(p.consumed <= input.len());
            prop_assert!(p.consumed > 0 || input.is_empty());
        }
    }

    /// Splitting a stream at arbitrary points yields the same commands as
    /// parsing it whole.
    #[test]
    fn split_invariance(cmds in proptest::collection::vec(arb_command(), 1..12), pieces in proptest::collection::vec(1usize..40, 1..8)) {
        let stream: Vec<u8> = cmds.concat();
        prop_assert_eq!(trace(&stream, &[stream.len().max(1)]), trace(&stream, &pieces));
    }

    /// A well-formed set parses back to what was encoded.
    #[test]
    fn set_roundtrip(key in "[!-~]{1,250}", flags: u32, exptime in -1000i32..100000, data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut input = format!("set {key} {flags} {exptime} {}\r\n", data.len()).into_bytes();
        input.extend_from_slice(&data);
        input.extend_from_slice(b"\r\n");
        let p = parse(&input, &LIMITS).unwrap();
        prop_assert_eq!(p.consumed, input.len());
        prop_assert_eq!(p.command, Command::Store { mode: StoreMode::Set, key: key.as_bytes(), flags, exptime, cas: 0, data: &data, noreply: false });
    }
}
