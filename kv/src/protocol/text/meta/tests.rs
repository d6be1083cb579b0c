//! Tests of the meta parser: memcached's replies to bad input, flags in
//! order, and property tests (arbitrary bytes never panic; valid commands
//! round-trip through rendering and parsing).

use super::*;
use proptest::prelude::*;

const LIMITS: Limits = Limits { item_size_max: 1 << 20 };

fn one(input: &[u8]) -> Parsed<'_> {
    crate::protocol::text::parse(input, &LIMITS).expect("complete command")
}

fn op_of(input: &[u8]) -> MetaOp {
    match one(input).command {
        Command::Meta(MetaCommand::Op(op)) => *op,
        c => panic!("expected a meta request, got {c:?}"),
    }
}

fn error_of(input: &[u8]) -> &'static [u8] {
    match one(input).command {
        Command::Reply { text, noreply: false } => text,
        c => panic!("expected an error line, got {c:?}"),
    }
}

#[test]
fn error_lines_match_their_display() {
    for e in [
        MetaError::Unknown,
        MetaError::BadFormat,
        MetaError::GetFlagsTooLong,
        MetaError::FlagsTooLong,
        MetaError::Duplicate,
        MetaError::InvalidFlag,
        MetaError::InvalidOrDuplicate,
        MetaError::Decode,
        MetaError::BadToken,
        MetaError::ModeLength,
        MetaError::Initial,
        MetaError::Delta,
        MetaError::OpaqueTooLong,
        MetaError::SetMode,
        MetaError::ArithMode,
    ] {
        assert_eq!(e.line(), format!("{e}\r\n").as_bytes());
    }
}

#[test]
fn get_flags_in_order() {
    let op = op_of(b"mg foo t T30 v c O12 k q u N5 R7 s f l h\r\n");
    assert_eq!(op.kind, MetaKind::Get);
    assert_eq!(op.key, b"foo");
    assert!(op.value && op.quiet && op.no_update);
    assert_eq!((op.ttl, op.vivify, op.recache), (Some(30), Some(5), Some(7)));
    assert_eq!(
        op.flags,
        vec![
            MetaFlag::Ttl,
            MetaFlag::SetTtl,
            MetaFlag::Cas,
            MetaFlag::Opaque(b"O12".to_vec()),
            MetaFlag::Key,
            MetaFlag::Vivify,
            MetaFlag::Recache,
            MetaFlag::Size,
            MetaFlag::Flags,
            MetaFlag::LastAccess,
            MetaFlag::Hit,
        ]
    );
}

#[test]
fn errors_like_memcached() {
    assert_eq!(error_of(b"mg\r\n"), replies::ERROR);
    assert_eq!(error_of(b"mx a\r\n"), replies::ERROR);
    assert_eq!(one(b"mn extra\r\n").command, Command::Meta(MetaCommand::NoOp));
    assert_eq!(error_of(b"mg a v v\r\n"), MetaError::Duplicate.line());
    assert_eq!(error_of(b"mg a E5\r\n"), MetaError::InvalidFlag.line());
    assert_eq!(error_of(b"md a E5\r\n"), MetaError::InvalidOrDuplicate.line());
    assert_eq!(error_of(b"mg a Tx\r\n"), MetaError::BadToken.line());
    assert_eq!(error_of(b"mg a Cz Fx\r\n"), MetaError::BadToken.line());
    assert_eq!(error_of(b"mg a Fx\r\n"), MetaError::BadFormat.line());
    assert_eq!(error_of(b"mg a Mxy\r\n"), MetaError::ModeLength.line());
    assert_eq!(error_of(b"mg abc b\r\n"), MetaError::Decode.line());
    assert_eq!(error_of(b"ma a Mx\r\n"), MetaError::ArithMode.line());
    assert_eq!(error_of(b"me\r\n"), replies::BAD_FORMAT);
    assert_eq!(error_of(b"me abc b\r\n"), replies::BAD_FORMAT);
    let long = format!("mg {}\r\n", "k".repeat(251));
    assert_eq!(error_of(long.as_bytes()), replies::BAD_FORMAT);
    let many = format!("mg a {}\r\n", ["1"; 18].join(" "));
    assert_eq!(error_of(many.as_bytes()), MetaError::GetFlagsTooLong.line());
    let many = format!("md a {}\r\n", ["1"; 18].join(" "));
    assert_eq!(error_of(many.as_bytes()), MetaError::FlagsTooLong.line());
    let opaque = format!("md a O{}\r\n", "1".repeat(32));
    assert_eq!(error_of(opaque.as_bytes()), MetaError::OpaqueTooLong.line());
}

#[test]
fn set_modes_values_and_swallowing() {
    let p = one(b"ms k 3 T5 F7 MA c\r\nabc\r\nmn\r\n");
    assert_eq!(p.consumed, 24);
    let Command::Meta(MetaCommand::Op(op)) = p.command else { panic!("not a request") };
    assert_eq!(op.kind, MetaKind::Set { mode: StoreMode::Append, data: b"abc".to_vec() });
    assert_eq!((op.ttl, op.client_flags), (Some(5), 7));
    // A CAS value turns set and replace into cas, not add.
    assert!(matches!(op_of(b"ms k 1 C5\r\nx\r\n").kind, MetaKind::Set { mode: StoreMode::Cas, .. }));
    assert!(matches!(op_of(b"ms k 1 C5 MR\r\nx\r\n").kind, MetaKind::Set { mode: StoreMode::Cas, .. }));
    assert!(matches!(op_of(b"ms k 1 C5 ME\r\nx\r\n").kind, MetaKind::Set { mode: StoreMode::Add, .. }));
    assert!(parse_incomplete(b"ms k 3\r\nab"));
    // Errors after the length swallow the value; bad lengths do not.
    let p = one(b"ms k 3 Mz\r\nabc\r\n");
    assert_eq!((p.consumed, p.swallow), (11, 5));
    assert_eq!(p.command, Command::Reply { text: MetaError::SetMode.line(), noreply: false });
    let p = one(b"ms k x\r\n");
    assert_eq!((p.command, p.swallow), (Command::Reply { text: replies::BAD_FORMAT, noreply: false }, 0));
    assert_eq!(error_of(b"ms k\r\n"), replies::BAD_FORMAT);
    assert_eq!(op_of(b"ms k 1\r\nxyz").kind, MetaKind::BadChunk);
    let p = one(b"ms k 2000000 q\r\n");
    assert_eq!(p.command, Command::Meta(MetaCommand::TooLarge { key: b"k".to_vec() }));
    assert_eq!(p.swallow, 2_000_002);
}

fn parse_incomplete(input: &[u8]) -> bool {
    crate::protocol::text::parse(input, &LIMITS).is_none()
}

#[test]
fn base64_keys() {
    let op = op_of(b"mg Zm9v b k\r\n");
    assert_eq!((op.key.as_slice(), op.key_binary), (&b"foo"[..], true));
    let op = op_of(b"me Zm9v b\r\n");
    assert_eq!((op.kind, op.key.as_slice()), (MetaKind::Debug, &b"foo"[..]));
}

/// Renders a request as a client would send it.
fn render(kind: u8, key: &[u8], flags: &[String], data: &[u8]) -> Vec<u8> {
    let mut v = vec![b'm', kind, b' '];
    v.extend_from_slice(key);
    if kind == b's' {
        v.extend_from_slice(format!(" {}", data.len()).as_bytes());
    }
    for f in flags {
        v.push(b' ');
        v.extend_from_slice(f.as_bytes());
    }
    v.extend_from_slice(b"\r\n");
    if kind == b's' {
        v.extend_from_slice(data);
        v.extend_from_slice(b"\r\n");
    }
    v
}

fn flag() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["v", "q", "k", "c", "t", "s", "f", "l", "h", "u", "I"]).prop_map(String::from),
        (prop::sample::select(vec!['T', 'N', 'R']), -100i32..100_000).prop_map(|(c, n)| format!("{c}{n}")),
        (prop::sample::select(vec!['C', 'D', 'J']), any::<u64>()).prop_map(|(c, n)| format!("{c}{n}")),
        any::<u32>().prop_map(|n| format!("F{n}")),
        "[a-zA-Z0-9]{0,31}".prop_map(|s| format!("O{s}")),
    ]
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..200), kind in prop::sample::select(vec![b'g', b's', b'd', b'a', b'e', b'n', b'x'])) {
        let input = [&[b'm', kind][..], &tail].concat();
        if let Some(p) = crate::protocol::text::parse(&input, &LIMITS) {
            prop_assert!(p.consumed <= input.len());
        }
    }

    #[test]
    fn valid_commands_round_trip(
        kind in prop::sample::select(vec![b'g', b's', b'd', b'a']),
        key in proptest::collection::vec(any::<u8>(), 1..100),
        binary in any::<bool>(),
        flags in proptest::collection::btree_map(any::<u8>(), flag(), 0..12),
        data in proptest::collection::vec(any::<u8>(), 0..50),
    ) {
        // One flag per letter, as memcached requires.
        let mut by_letter = std::collections::BTreeMap::new();
        for f in flags.into_values() {
            by_letter.entry(f.as_bytes()[0]).or_insert(f);
        }
        let mut flags: Vec<String> = by_letter.into_values().collect();
        let key_token = if binary {
            flags.push("b".into());
            base64::encode(&key)
        } else {
            key.iter().map(|&b| if b.is_ascii_graphic() { b } else { b'x' }).collect()
        };
        prop_assume!(key_token.len() <= KEY_MAX);
        let input = render(kind, &key_token, &flags, &data);
        let p = one(&input);
        prop_assert_eq!(p.consumed, input.len());
        let Command::Meta(MetaCommand::Op(op)) = p.command else {
            return Err(TestCaseError::fail(format!("refused: {:?}", String::from_utf8_lossy(&input))));
        };
        prop_assert_eq!(&op.key, if binary { &key } else { &key_token });
        prop_assert_eq!(op.key_binary, binary);
        prop_assert_eq!(op.value, flags.iter().any(|f| f == "v"));
        prop_assert_eq!(op.quiet, flags.iter().any(|f| f == "q"));
        for f in &flags {
            let n = &f[1..];
            match f.as_bytes()[0] {
                b'T' => prop_assert_eq!(op.ttl, n.parse().ok()),
                b'N' => prop_assert_eq!(op.vivify, n.parse().ok()),
                b'R' => prop_assert_eq!(op.recache, n.parse().ok()),
                b'C' => prop_assert_eq!(op.cas, n.parse().ok()),
                b'D' => prop_assert_eq!(Some(op.delta), n.parse().ok()),
                b'J' => prop_assert_eq!(Some(op.initial), n.parse().ok()),
                b'F' => prop_assert_eq!(Some(op.client_flags), n.parse().ok()),
                b'O' => prop_assert!(op.flags.contains(&MetaFlag::Opaque(f.as_bytes().to_vec()))),
                _ => {}
            }
        }
        if kind == b's' {
            let MetaKind::Set { data: got, .. } = &op.kind else {
                return Err(TestCaseError::fail("not a set"));
            };
            prop_assert_eq!(got, &data);
        }
    }
}
