//! Sessions end to end over socket pairs: they authenticate both ways,
//! refuse a wrong secret or another protocol, carry messages of any size up
//! to the limit, and end at the first altered, replayed, reordered or
//! injected record.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use gossamer_session::{accept, connect, read_record, Initiator, Psk, Responder, SessionError, PIECE_MAX, RECORD_MAX};

const P: &[u8] = b"gossamer test/1";

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

fn pair(
    client_secret: &[u8],
    server_secret: &[u8],
    client_p: &[u8],
) -> (Result<(), SessionError>, Result<Vec<u8>, SessionError>) {
    let (mut a, mut b) = UnixStream::pair().unwrap();
    let (cs, ss) = (Psk::derive(client_secret, "test"), Psk::derive(server_secret, "test"));
    let cp = client_p.to_vec();
    let t = std::thread::spawn(move || connect(&mut a, &cs, &cp, soon(), b"first").map(|_| ()));
    let r = accept(&mut b, &ss, P, soon(), 1024).map(|(_, m)| m);
    drop(b);
    (t.join().unwrap(), r)
}

#[test]
fn the_same_secret_authenticates_both_ways() {
    let (c, s) = pair(b"secret", b"secret", P);
    c.unwrap();
    assert_eq!(s.unwrap(), b"first");
}

#[test]
fn a_wrong_secret_or_protocol_fails_on_both_sides() {
    for (secret, prologue) in [(&b"wrong"[..], P), (&b"secret"[..], &b"gossamer test/2"[..])] {
        let (c, s) = pair(secret, b"secret", prologue);
        assert!(matches!(s, Err(SessionError::Authentication)), "{s:?}");
        assert!(matches!(c, Err(SessionError::Authentication)), "{c:?}");
    }
}

#[test]
fn messages_of_every_size_cross_and_the_limit_holds() {
    let (mut a, mut b) = UnixStream::pair().unwrap();
    let psk = Psk::derive(b"s", "test");
    let psk2 = psk.clone();
    let t = std::thread::spawn(move || {
        let mut s = connect(&mut a, &psk2, P, soon(), b"").unwrap();
        for len in [0, 1, PIECE_MAX - 1, PIECE_MAX, PIECE_MAX + 1, 3 * PIECE_MAX + 7, 1 << 20] {
            let msg: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            s.send(&mut a, &msg).unwrap();
        }
        s.send(&mut a, &vec![1u8; (1 << 20) + 1]).unwrap();
        a
    });
    let (mut s, first) = accept(&mut b, &psk, P, soon(), 16).unwrap();
    assert!(first.is_empty());
    for len in [0, 1, PIECE_MAX - 1, PIECE_MAX, PIECE_MAX + 1, 3 * PIECE_MAX + 7, 1 << 20] {
        let m = s.recv(&mut b, 1 << 20).unwrap();
        assert_eq!(m.len(), len);
        assert!(m.iter().enumerate().all(|(i, &x)| x == (i * 31 % 251) as u8));
    }
    let r = s.recv(&mut b, 1 << 20);
    assert!(matches!(r, Err(SessionError::TooLarge { what: "message", .. })), "{r:?}");
    drop(t.join().unwrap());
}

/// A session over memory: initiator and responder halves and the records
/// of three messages from the initiator.
fn three_records() -> (gossamer_session::Opener, Vec<Vec<u8>>) {
    let psk = Psk::derive(b"s", "test");
    let (init, hello) = Initiator::start(&psk, P).unwrap();
    let (resp, reply) = Responder::respond(&psk, P, &hello[2..]).unwrap();
    let (mut sealer, _) = init.finish(&reply[2..]).unwrap().split();
    let (_, opener) = resp.split();
    let records = ["one", "two", "three"].iter().map(|m| sealer.seal(m.as_bytes()).unwrap()[2..].to_vec()).collect();
    (opener, records)
}

#[test]
fn altered_replayed_reordered_and_injected_records_end_the_session() {
    // In order: all open.
    let (mut o, r) = three_records();
    for (rec, want) in r.iter().zip(["one", "two", "three"]) {
        assert_eq!(o.open(rec, 100).unwrap().unwrap(), want.as_bytes());
    }
    // Altered.
    let (mut o, r) = three_records();
    let mut bad = r[0].clone();
    bad[5] ^= 1;
    assert!(matches!(o.open(&bad, 100), Err(SessionError::Forged)));
    assert!(matches!(o.open(&r[0], 100), Err(SessionError::Forged)), "a broken session stays broken");
    // Replayed.
    let (mut o, r) = three_records();
    o.open(&r[0], 100).unwrap();
    assert!(matches!(o.open(&r[0], 100), Err(SessionError::Forged)));
    // Reordered (or one dropped).
    let (mut o, r) = three_records();
    assert!(matches!(o.open(&r[1], 100), Err(SessionError::Forged)));
    // Injected: a record sealed in another session with the same secret.
    let (mut o, _) = three_records();
    let (_, other) = three_records();
    assert!(matches!(o.open(&other[0], 100), Err(SessionError::Forged)));
}

#[test]
fn a_replayed_first_handshake_message_authenticates_nothing() {
    let psk = Psk::derive(b"s", "test");
    let (_init, hello) = Initiator::start(&psk, P).unwrap();
    // An eavesdropper replays the real initiator's first message and then
    // anything it likes: the responder never sees a first message open.
    let (mut a, mut b) = UnixStream::pair().unwrap();
    a.write_all(&hello).unwrap();
    let mut garbage = vec![0u8, 40];
    garbage.extend_from_slice(&[7u8; 40]);
    let t = std::thread::spawn(move || {
        let reply = read_record(&mut a, 1024, Some(soon())).unwrap();
        assert!(reply.len() < 100);
        a.write_all(&garbage).unwrap();
        a
    });
    let r = accept(&mut b, &psk, P, soon(), 1024);
    assert!(matches!(r, Err(SessionError::Authentication)), "{:?}", r.err());
    drop(t.join().unwrap());
}

#[test]
fn garbage_silence_and_a_big_announcement_are_refused_within_the_deadline() {
    let psk = Psk::derive(b"s", "test");
    // Garbage of a plausible size.
    let (mut a, mut b) = UnixStream::pair().unwrap();
    a.write_all(&[0, 48]).unwrap();
    a.write_all(&[0x55; 48]).unwrap();
    assert!(matches!(accept(&mut b, &psk, P, soon(), 1024), Err(SessionError::Authentication)));
    // A big announcement: refused before any of it is read.
    let (mut a, mut b) = UnixStream::pair().unwrap();
    a.write_all(&(RECORD_MAX as u16).to_be_bytes()).unwrap();
    assert!(matches!(accept(&mut b, &psk, P, soon(), 1024), Err(SessionError::TooLarge { .. })));
    // Silence.
    let (_a, mut b) = UnixStream::pair().unwrap();
    let t0 = Instant::now();
    let r = accept(&mut b, &psk, P, t0 + Duration::from_millis(200), 1024);
    assert!(matches!(r, Err(SessionError::Deadline(_))), "{:?}", r.err());
    assert!(t0.elapsed() < Duration::from_secs(2));
}

proptest::proptest! {
    /// Whatever bytes arrive as a record, opening returns an error and never panics.
    #[test]
    fn opening_arbitrary_records_never_panics(body in proptest::collection::vec(proptest::num::u8::ANY, 0..2048)) {
        let (mut o, _) = three_records();
        proptest::prop_assert!(o.open(&body, 1 << 20).is_err());
    }

    /// Whatever bytes arrive as a first handshake message, responding fails cleanly.
    #[test]
    fn arbitrary_first_messages_do_not_authenticate(body in proptest::collection::vec(proptest::num::u8::ANY, 0..2048)) {
        let psk = Psk::derive(b"s", "test");
        proptest::prop_assert!(Responder::respond(&psk, P, &body).is_err());
    }
}

#[test]
fn a_record_longer_than_the_message_may_be_is_refused_before_it_is_read() {
    // An initiator replaying a captured first message gets a reply, but its
    // next record is bounded by the first message's limit, not by the
    // largest record.
    let (mut a, mut b) = UnixStream::pair().unwrap();
    let psk = Psk::derive(b"secret", "test");
    let (_, first) = Initiator::start(&psk, P).unwrap();
    a.write_all(&first).unwrap();
    a.write_all(&60000u16.to_be_bytes()).unwrap();
    let t = std::thread::spawn(move || {
        // Room for the whole record in the socket: the bound, not a full
        // buffer or a deadline, is what ends the read.
        let _ = a.write_all(&vec![0u8; 60000]);
        a
    });
    let r = accept(&mut b, &psk, P, soon(), 4096);
    assert!(matches!(r, Err(SessionError::TooLarge { len: 60000, max: 4113, .. })), "{:?}", r.err());
    drop(b);
    drop(t.join().unwrap());
}
