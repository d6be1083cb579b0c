//! Tests of binary framing: memcached's treatment of malformed headers, and
//! property tests over arbitrary bytes and arbitrary splits.

use super::*;
use proptest::prelude::*;

const MAX: usize = 1 << 20;

fn req(op: u8, key: &[u8], extras: &[u8], value: &[u8]) -> Vec<u8> {
    let h = Header {
        magic: REQUEST,
        opcode: op,
        keylen: key.len() as u16,
        extlen: extras.len() as u8,
        datatype: 0,
        vbucket: 0,
        bodylen: (key.len() + extras.len() + value.len()) as u32,
        opaque: 7,
        cas: 0,
    };
    let mut v = Vec::new();
    h.encode(&mut v);
    v.extend_from_slice(extras);
    v.extend_from_slice(key);
    v.extend_from_slice(value);
    v
}

fn status_of(input: &[u8]) -> (u16, bool, usize) {
    match parse(input, MAX).unwrap() {
        Parsed { frame: Frame::Error { status, close, .. }, swallow, .. } => (status, close, swallow),
        p => panic!("expected an error, got {p:?}"),
    }
}

#[test]
fn complete_set() {
    let input = req(opcode::SET, b"k", &[0, 0, 0, 5, 0, 0, 0, 0], b"value");
    let p = parse(&input, MAX).unwrap();
    assert_eq!(p.consumed, input.len());
    let Frame::Request { header, extras, key, value } = p.frame else { panic!() };
    assert_eq!((header.opcode, header.opaque, key, value, extras.len()), (opcode::SET, 7, &b"k"[..], &b"value"[..], 8));
    for cut in 0..input.len() {
        assert!(parse(&input[..cut], MAX).is_none(), "cut at {cut}");
    }
}

#[test]
fn malformed() {
    // Extras that the opcode does not take: invalid arguments, then close.
    assert_eq!(status_of(&req(opcode::GET, b"k", b"xxxx", b"")), (status::EINVAL, true, 0));
    assert_eq!(status_of(&req(opcode::SET, b"k", b"", b"v")), (status::EINVAL, true, 0));
    assert_eq!(status_of(&req(opcode::GET, b"", b"", b"")), (status::EINVAL, true, 0));
    assert_eq!(status_of(&req(opcode::NOOP, b"k", b"", b"")), (status::EINVAL, true, 0));
    assert_eq!(status_of(&req(opcode::INCREMENT, b"k", &[0; 16], b"")), (status::EINVAL, true, 0));
    assert_eq!(status_of(&req(opcode::GET, &[b'k'; 251], b"", b"")), (status::EINVAL, true, 0));
    // Key and extras longer than the body: unknown command, then close.
    let mut bad = req(opcode::SET, b"kk", &[0; 8], b"");
    bad[8..12].copy_from_slice(&4u32.to_be_bytes());
    assert_eq!(status_of(&bad), (status::UNKNOWN_COMMAND, true, 0));
    // Unknown opcodes (verbosity and SASL included) skip their body.
    assert_eq!(status_of(&req(0x50, b"k", b"", b"vvv")), (status::UNKNOWN_COMMAND, false, 4));
    assert_eq!(status_of(&req(0x1b, b"", &[0, 0, 0, 1], b"")), (status::UNKNOWN_COMMAND, false, 4));
    // A wrong magic byte closes the connection.
    let mut m = req(opcode::NOOP, b"", b"", b"");
    m[0] = 0x81;
    assert_eq!(parse(&m, MAX).unwrap().frame, Frame::BadMagic);
}

#[test]
fn too_large_value_is_not_buffered() {
    let mut input = req(opcode::SET, b"big", &[0; 8], b"");
    let vlen = MAX as u32;
    input[8..12].copy_from_slice(&(3 + 8 + vlen).to_be_bytes());
    let p = parse(&input, MAX).unwrap();
    assert!(matches!(p.frame, Frame::TooLarge { key: b"big", .. }));
    assert_eq!((p.consumed, p.swallow), (input.len(), vlen as usize));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Arbitrary bytes after a request magic never panic, and a result never
    /// claims more input than there is.
    #[test]
    fn arbitrary_bytes(mut input in proptest::collection::vec(any::<u8>(), 0..400), magic: bool) {
        if magic && !input.is_empty() {
            input[0] = REQUEST;
        }
        if let Some(p) = parse(&input, MAX) {
            prop_assert!(p.consumed <= input.len());
        }
    }

    /// Well-formed requests parse back whole, and only once complete.
    #[test]
    fn roundtrip(op in prop_oneof![Just(opcode::SET), Just(opcode::GETK), Just(opcode::DELETEQ), Just(opcode::APPEND)],
                 key in proptest::collection::vec(any::<u8>(), 1..250),
                 value in proptest::collection::vec(any::<u8>(), 0..200)) {
        let (extras, value): (Vec<u8>, Vec<u8>) = match op {
            opcode::SET => (vec![1, 2, 3, 4, 0, 0, 0, 9], value),
            opcode::APPEND => (vec![], value),
            _ => (vec![], vec![]),
        };
        let input = req(op, &key, &extras, &value);
        let p = parse(&input, MAX).unwrap();
        prop_assert_eq!(p.consumed, input.len());
        match p.frame {
            Frame::Request { key: k, value: v, extras: e, .. } => {
                prop_assert_eq!(k, &key[..]);
                prop_assert_eq!(v, &value[..]);
                prop_assert_eq!(e, &extras[..]);
            }
            f => prop_assert!(false, "unexpected frame {:?}", f),
        }
        prop_assert!(parse(&input[..input.len() - 1], MAX).is_none());
    }
}
