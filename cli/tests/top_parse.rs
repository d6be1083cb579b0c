//! The snapshot decoder of `gossamer top` reads bytes from another
//! process: whatever they are, it returns a value or an error, never
//! panics; and what the documented format encodes, it decodes exactly.

use gossamer_cli::top::{parse, render, Snapshot, TopError, TrustRow, TrusteeRow};
use proptest::prelude::*;

/// The documented line format (as the runtime writes it).
fn encode(s: &Snapshot) -> String {
    let mut out = format!("gossamer-profile 1 {} {}\n", s.pid, s.workers);
    for t in &s.trusts {
        out += &format!(
            "trust {:x} {} {} {} {} {} {} {} {} {}\n",
            t.id,
            t.trustee,
            t.requests,
            t.local_hits,
            t.served,
            t.service_ns,
            t.rtt_count,
            t.rtt_p50,
            t.rtt_p99,
            t.type_name
        );
    }
    for t in &s.trustees {
        out += &format!(
            "trustee {} {} {} {} {} {} {} {}\n",
            t.trustee,
            t.batches_sent,
            t.requests_sent,
            t.queued_p50,
            t.queued_p99,
            t.batches_served,
            t.requests_served,
            t.busy_ns
        );
    }
    for m in &s.missing {
        out += &format!("missing {m}\n");
    }
    out + "end\n"
}

fn trust() -> impl Strategy<Value = TrustRow> {
    (any::<u64>(), 0..1024usize, any::<[u64; 7]>(), "[A-Za-z_:<>, ()&\\[\\];0-9]{1,60}")
        .prop_filter("type names do not end in a space", |(_, _, _, n)| !n.ends_with(' ') && !n.starts_with(' '))
        .prop_map(|(id, trustee, v, type_name)| TrustRow {
            id,
            trustee,
            requests: v[0],
            local_hits: v[1],
            served: v[2],
            service_ns: v[3],
            rtt_count: v[4],
            rtt_p50: v[5],
            rtt_p99: v[6],
            type_name,
        })
}

fn trustee() -> impl Strategy<Value = TrusteeRow> {
    (0..1024usize, any::<[u64; 7]>()).prop_map(|(trustee, v)| TrusteeRow {
        trustee,
        batches_sent: v[0],
        requests_sent: v[1],
        queued_p50: v[2],
        queued_p99: v[3],
        batches_served: v[4],
        requests_served: v[5],
        busy_ns: v[6],
    })
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    (
        any::<u32>(),
        0..4096usize,
        prop::collection::vec(trust(), 0..8),
        prop::collection::vec(trustee(), 0..8),
        prop::collection::vec(0..64usize, 0..3),
    )
        .prop_map(|(pid, workers, trusts, trustees, missing)| Snapshot { pid, workers, trusts, trustees, missing })
}

proptest! {
    #[test]
    fn encoded_snapshots_decode_exactly(s in snapshot()) {
        let text = encode(&s);
        prop_assert_eq!(parse(&text), Ok(s.clone()));
        // And the table of any decoded snapshot renders.
        let _ = render(Some(&s), &s, 1.0, 5);
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        let _ = parse(&text);
        let _ = parse(&format!("gossamer-profile 1 1 1\n{text}"));
    }

    #[test]
    fn damaged_snapshots_are_errors_or_values_never_panics(
        s in snapshot(),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let text = encode(&s);
        let truncated = &text.as_bytes()[..cut.index(text.len() + 1)];
        let r = parse(&String::from_utf8_lossy(truncated));
        if truncated.len() < text.len() - 1 {
            prop_assert!(r.is_err());
        }
        let mut bytes = text.into_bytes();
        let i = flip.index(bytes.len());
        bytes[i] = byte;
        if let Ok(snap) = parse(&String::from_utf8_lossy(&bytes)) {
            let _ = render(None, &snap, 1.0, 5);
        }
    }
}

#[test]
fn errors_name_the_line() {
    let e = parse("gossamer-profile 1 1 1\ntrustee 1 2 3\nend\n").unwrap_err();
    assert_eq!(e, TopError::BadLine { line: 2, reason: "missing queued p50".into() });
}
