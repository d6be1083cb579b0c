//! The `adaptive` decoder of `gossamer top` reads bytes from another
//! process: whatever they are, it returns a value or an error, never
//! panics; what the runtime writes, it decodes exactly. And the command
//! that `--set-policy` sends is checked before it leaves.

use gossamer_cli::top::{parse_adaptive, policy_command, render_adaptive, AdaptiveList, AdaptiveRow, POLICIES};
use proptest::prelude::*;

/// The documented answer (as the runtime writes it).
fn encode(l: &AdaptiveList) -> String {
    let mut out = String::new();
    for r in &l.rows {
        out += &format!("adaptive {:x} {} {} {}\n", r.id, r.trustee, r.policy, r.mode);
    }
    if l.more > 0 {
        out += &format!("more {}\n", l.more);
    }
    out + "end\n"
}

fn list() -> impl Strategy<Value = AdaptiveList> {
    let row = (any::<u64>(), 0usize..1 << 20, prop::sample::select(POLICIES.to_vec()), any::<bool>()).prop_map(
        |(id, trustee, policy, lock)| AdaptiveRow {
            id,
            trustee,
            policy: policy.into(),
            mode: if lock { "lock" } else { "delegate" }.into(),
        },
    );
    (prop::collection::vec(row, 0..40), prop::option::of(1u64..1 << 40))
        .prop_map(|(rows, more)| AdaptiveList { rows, more: more.unwrap_or(0) })
}

proptest! {
    #[test]
    fn encoded_lists_decode_exactly(l in list()) {
        prop_assert_eq!(parse_adaptive(&encode(&l)), Ok(l.clone()));
        let _ = render_adaptive(&l, 5);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        let _ = parse_adaptive(&text);
        let _ = parse_adaptive(&format!("adaptive 7f 1 lock lock\n{text}"));
    }

    #[test]
    fn damaged_answers_are_errors_or_values(l in list(), cut in any::<prop::sample::Index>(),
                                            flip in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let text = encode(&l);
        let truncated = &text.as_bytes()[..cut.index(text.len() + 1)];
        if truncated.len() < text.len() - 1 {
            prop_assert!(parse_adaptive(&String::from_utf8_lossy(truncated)).is_err());
        }
        let mut bytes = text.into_bytes();
        let i = flip.index(bytes.len());
        bytes[i] = byte;
        if let Ok(l) = parse_adaptive(&String::from_utf8_lossy(&bytes)) {
            for r in &l.rows {
                prop_assert!(POLICIES.contains(&r.policy.as_str()));
                prop_assert!(r.mode == "lock" || r.mode == "delegate");
            }
        }
    }

    #[test]
    fn policy_commands_are_what_the_program_decodes(id in any::<u64>(), p in prop::sample::select(POLICIES.to_vec())) {
        prop_assert_eq!(policy_command(&format!("{id:#x}={p}")).unwrap(), format!("policy {id:x} {p}"));
    }
}

#[test]
fn impossible_answers_are_refused() {
    for bad in [
        "adaptive 7f 1 lock\nend\n",           // a field short
        "adaptive 7f 1 lock lock x\nend\n",    // a field too many
        "adaptive 7f 1 sometimes lock\nend\n", // unknown policy
        "adaptive 7f 1 lock adaptive\nend\n",  // a policy is no mode
        "adaptive 0x7f 1 lock lock\nend\n",    // ids come without 0x
        "adaptive 11112222333344445 1 lock lock\nend\n",
        "more 0\nend\n",
        "more 3\nadaptive 7f 1 lock lock\nend\n", // rows after the count
        "adaptive 7f 1 lock lock\n",              // no end
    ] {
        assert!(parse_adaptive(bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        parse_adaptive("error unknown command \"adaptive\"\n"),
        Err(gossamer_cli::top::TopError::Refused("unknown command \"adaptive\"".into()))
    );
}

#[test]
fn the_mode_column_names_the_policy_and_the_measured_mode() {
    let row = |policy: &str, mode: &str| AdaptiveRow { id: 1, trustee: 0, policy: policy.into(), mode: mode.into() };
    assert_eq!(row("adaptive", "lock").label(), "adaptive:lock");
    assert_eq!(row("adaptive", "delegate").label(), "adaptive:delegate");
    assert_eq!(row("lock", "lock").label(), "lock");
    assert_eq!(row("delegate", "delegate").label(), "delegate");
    let shown = render_adaptive(&AdaptiveList { rows: vec![row("adaptive", "lock")], more: 3 }, 10);
    assert!(shown.contains("0x1") && shown.contains("adaptive  lock") && shown.contains("and 3 more"), "{shown}");
}

#[test]
fn set_policy_values_are_checked_before_they_are_sent() {
    assert_eq!(policy_command("0x7f3a10=lock").unwrap(), "policy 7f3a10 lock");
    assert_eq!(policy_command("7F3A10=delegate").unwrap(), "policy 7F3A10 delegate");
    for bad in [
        "",
        "0x7f",
        "=lock",
        "0x=lock",
        "0x7f=",
        "0x7f=sometimes",
        "0xzz=lock",
        "0x7f=lock extra",
        "0x11112222333344445=lock",
        "0x7f=lock=lock",
    ] {
        assert!(policy_command(bad).is_err(), "{bad:?}");
    }
}
