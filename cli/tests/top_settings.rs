//! The `settings` decoder of `gossamer top` reads bytes from another
//! process: whatever they are, it returns a value or an error, never
//! panics; what the runtime writes, it decodes exactly. And the commands
//! that `--set-dedicated` and `--set` send are checked before they leave.

use gossamer_cli::top::{dedicated_command, parse_settings, render_settings, set_command, ParamsRow, Settings};
use proptest::prelude::*;

/// The documented answer (as the runtime writes it).
fn encode(s: &Settings) -> String {
    let mut out = format!("dedicated {} {} {}\n", s.dedicated, if s.auto { "auto" } else { "fixed" }, s.workers);
    for p in &s.params {
        let [a, b, c, d] = p.values;
        out += &format!("params {} tight_polls={a} idle_spin_us={b} sleep_poll_us={c} fiber_yield={d}\n", p.trustee);
    }
    out + "end\n"
}

fn settings() -> impl Strategy<Value = Settings> {
    (1usize..64, any::<bool>()).prop_flat_map(|(workers, auto)| {
        (0..workers, prop::collection::vec((0usize..1 << 20, any::<[u64; 4]>()), 0..=workers)).prop_map(
            move |(dedicated, params)| Settings {
                dedicated,
                auto,
                workers,
                params: params.into_iter().map(|(trustee, values)| ParamsRow { trustee, values }).collect(),
            },
        )
    })
}

proptest! {
    #[test]
    fn encoded_settings_decode_exactly(s in settings()) {
        prop_assert_eq!(parse_settings(&encode(&s)), Ok(s.clone()));
        let _ = render_settings(&s);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        let _ = parse_settings(&text);
        let _ = parse_settings(&format!("dedicated 0 fixed 2\n{text}"));
    }

    #[test]
    fn damaged_answers_are_errors_or_values(s in settings(), cut in any::<prop::sample::Index>(),
                                            flip in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let text = encode(&s);
        let truncated = &text.as_bytes()[..cut.index(text.len() + 1)];
        if truncated.len() < text.len() - 1 {
            prop_assert!(parse_settings(&String::from_utf8_lossy(truncated)).is_err());
        }
        let mut bytes = text.into_bytes();
        let i = flip.index(bytes.len());
        bytes[i] = byte;
        if let Ok(s) = parse_settings(&String::from_utf8_lossy(&bytes)) {
            prop_assert!(s.dedicated < s.workers && s.params.len() <= s.workers);
        }
    }
}

#[test]
fn impossible_answers_are_refused() {
    for bad in [
        "dedicated 2 fixed 2\nend\n",           // no worker left for fibers
        "dedicated 0 sometimes 2\nend\n",       // unknown policy
        "dedicated 0 fixed 1\nparams 0 tight_polls=1 idle_spin_us=1 sleep_poll_us=1 fiber_yield=1\nparams 0 tight_polls=1 idle_spin_us=1 sleep_poll_us=1 fiber_yield=1\nend\n", // more rows than workers
        "dedicated 0 fixed 1\nparams 0 idle_spin_us=1 tight_polls=1 sleep_poll_us=1 fiber_yield=1\nend\n", // order
        "dedicated 0 fixed 99999999\nend\n",
    ] {
        assert!(parse_settings(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn commands_are_checked_before_they_are_sent() {
    assert_eq!(dedicated_command("auto").unwrap(), "dedicated auto");
    assert_eq!(dedicated_command("2").unwrap(), "dedicated 2");
    assert!(dedicated_command("-1").is_err() && dedicated_command("two").is_err() && dedicated_command("").is_err());
    assert_eq!(set_command(&["idle_spin_us=5".into()], Some(1)).unwrap(), "set 1 idle_spin_us=5");
    assert_eq!(
        set_command(&["tight_polls=0".into(), "fiber_yield=9".into()], None).unwrap(),
        "set all tight_polls=0 fiber_yield=9"
    );
    for bad in ["spin=5", "idle_spin_us", "idle_spin_us=", "idle_spin_us=5 profile", "idle_spin_us=-1"] {
        assert!(set_command(&[bad.into()], None).is_err(), "{bad:?}");
    }
}
