//! The `follow` decoder of `gossamer top` reads bytes from another
//! process: whatever they are, it returns a value or an error, never
//! panics; what the runtime writes, it decodes exactly. And the command
//! that `--set-follow` sends is checked before it leaves.

use gossamer_cli::top_follow::{follow_command, parse_follow, render_follow, FollowList, FollowRow, KEYS};
use proptest::prelude::*;

/// The documented answer (as the runtime writes it).
fn encode(l: &FollowList) -> String {
    let mut out = String::new();
    for r in &l.rows {
        out += &format!("follow {:x} {} {} {}", r.id, r.holder, if r.on { "on" } else { "off" }, r.moves);
        for (k, v) in KEYS.iter().zip(r.params) {
            out += &format!(" {k}={v}");
        }
        out += "\n";
    }
    if l.more > 0 {
        out += &format!("more {}\n", l.more);
    }
    out + "end\n"
}

fn list() -> impl Strategy<Value = FollowList> {
    let row = (any::<u64>(), 0usize..1 << 20, any::<bool>(), any::<u64>(), any::<[u64; 5]>())
        .prop_map(|(id, holder, on, moves, params)| FollowRow { id, holder, on, moves, params });
    (prop::collection::vec(row, 0..40), prop::option::of(1u64..1 << 40))
        .prop_map(|(rows, more)| FollowList { rows, more: more.unwrap_or(0) })
}

proptest! {
    #[test]
    fn encoded_lists_decode_exactly(l in list()) {
        prop_assert_eq!(parse_follow(&encode(&l)), Ok(l.clone()));
        let _ = render_follow(&l, 5);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        let _ = parse_follow(&text);
        let _ = parse_follow(&format!(
            "follow 7f 1 on 0 window=1 window_ms=2 share_percent=3 return_percent=4 rest_windows=5\n{text}"
        ));
    }

    #[test]
    fn damaged_answers_are_errors_or_values(l in list(), cut in any::<prop::sample::Index>(),
                                            flip in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let text = encode(&l);
        let truncated = &text.as_bytes()[..cut.index(text.len() + 1)];
        if truncated.len() < text.len() - 1 {
            prop_assert!(parse_follow(&String::from_utf8_lossy(truncated)).is_err());
        }
        let mut bytes = text.into_bytes();
        let i = flip.index(bytes.len());
        bytes[i] = byte;
        let _ = parse_follow(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn follow_commands_are_what_the_program_decodes(
        id in any::<u64>(),
        switch in prop::option::of(any::<bool>()),
        params in prop::collection::btree_map(0..KEYS.len(), any::<u64>(), 0..5),
    ) {
        prop_assume!(switch.is_some() || !params.is_empty());
        let mut items: Vec<String> = switch.map(|on| if on { "on" } else { "off" }.to_string()).into_iter().collect();
        items.extend(params.iter().map(|(k, v)| format!("{}={v}", KEYS[*k])));
        let cmd = follow_command(&format!("{id:#x}={}", items.join(","))).unwrap();
        prop_assert_eq!(cmd, format!("follow {id:x} {}", items.join(" ")));
    }
}

#[test]
fn impossible_answers_are_refused() {
    let p = "window=64 window_ms=0 share_percent=60 return_percent=80 rest_windows=0";
    for bad in [
        format!("follow 7f 1 on {p}\nend\n"),           // no moves
        format!("follow 7f 1 maybe 0 {p}\nend\n"),      // neither on nor off
        format!("follow 7f 1 on 0 {p} extra=1\nend\n"), // a field too many
        "follow 7f 1 on 0 window=64 window_ms=0 share_percent=60 rest_windows=0 return_percent=80\nend\n".into(),
        format!("follow 0x7f 1 on 0 {p}\nend\n"), // ids come without 0x
        format!("follow 7f -1 on 0 {p}\nend\n"),  // a negative holder
        format!("follow 7f 1 on 0 {}\nend\n", p.replace("64", "+64")),
        format!("follow 11112222333344445 1 on 0 {p}\nend\n"),
        "more 0\nend\n".into(),
        format!("more 3\nfollow 7f 1 on 0 {p}\nend\n"), // rows after the count
        format!("follow 7f 1 on 0 {p}\n"),              // no end
    ] {
        assert!(parse_follow(&bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        parse_follow("error unknown command \"follow\"\n"),
        Err(gossamer_cli::top::TopError::Refused("unknown command \"follow\"".into()))
    );
    let l = parse_follow(&format!("follow 7f 1 off 3 {p}\nend\n")).unwrap();
    assert_eq!(l.rows, vec![FollowRow { id: 0x7f, holder: 1, on: false, moves: 3, params: [64, 0, 60, 80, 0] }]);
    let shown = render_follow(&FollowList { more: 2, ..l }, 10);
    assert!(shown.contains("0x7f") && shown.contains(" off ") && shown.contains("and 2 more"), "{shown}");
}

#[test]
fn set_follow_values_are_checked_before_they_are_sent() {
    assert_eq!(follow_command("0x7f3a10=off").unwrap(), "follow 7f3a10 off");
    assert_eq!(follow_command("7F3A10=on,window=256").unwrap(), "follow 7F3A10 on window=256");
    assert_eq!(
        follow_command("0x1=share_percent=70,rest_windows=0").unwrap(),
        "follow 1 share_percent=70 rest_windows=0"
    );
    for bad in [
        "",
        "0x7f",
        "=off",
        "0x=off",
        "0x7f=",
        "0x7f=sometimes",
        "0xzz=off",
        "0x7f=on,off",
        "0x7f=window=16,on",
        "0x7f=window=16,window=32",
        "0x7f=window=",
        "0x7f=window=-1",
        "0x7f=size=16",
        "0x7f=on window=16",
        "0x11112222333344445=off",
    ] {
        assert!(follow_command(bad).is_err(), "{bad:?}");
    }
}
