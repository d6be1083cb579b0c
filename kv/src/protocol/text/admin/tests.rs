//! Tests of the administrative command parsers: memcached's replies to
//! each form, and property tests over arbitrary arguments.

use super::*;
use crate::protocol::text::{parse, Limits};
use proptest::prelude::*;

const LIMITS: Limits = Limits { item_size_max: 1 << 20 };

fn cmd(line: &str) -> Command<'_> {
    parse(line.as_bytes(), &LIMITS).expect("complete command").command
}

fn adm(cmd: Admin<'_>, noreply: bool) -> Command<'_> {
    Command::Admin { cmd, noreply }
}

fn rep(text: &'static [u8], noreply: bool) -> Command<'static> {
    Command::Reply { text, noreply }
}

#[test]
fn stats_detail_forms() {
    assert_eq!(cmd("stats detail on\r\n"), adm(Admin::Detail(Detail::On), false));
    assert_eq!(cmd("stats detail off\r\n"), adm(Admin::Detail(Detail::Off), false));
    assert_eq!(cmd("stats detail dump\r\n"), adm(Admin::Detail(Detail::Dump), false));
    // Extra tokens are ignored, noreply included, as in memcached.
    assert_eq!(cmd("stats detail on extra\r\n"), adm(Admin::Detail(Detail::On), false));
    assert_eq!(cmd("stats detail dump noreply\r\n"), adm(Admin::Detail(Detail::Dump), false));
    assert_eq!(cmd("stats detail\r\n"), rep(replies::DETAIL_USAGE, false));
    assert_eq!(cmd("stats detail x\r\n"), rep(replies::DETAIL_USAGE, false));
    assert_eq!(cmd("stats sizes_enable\r\n"), adm(Admin::TrackSizes { on: true }, false));
    assert_eq!(cmd("stats sizes_disable\r\n"), adm(Admin::TrackSizes { on: false }, false));
    assert_eq!(cmd("stats sizes_enable x\r\n"), rep(replies::ERROR, false));
}

#[test]
fn watch_forms() {
    assert_eq!(cmd("watch\r\n"), adm(Admin::Watch { mask: log::FETCHERS }, false));
    assert_eq!(
        cmd("watch mutations connevents\r\n"),
        adm(Admin::Watch { mask: log::MUTATIONS | log::CONNEVENTS }, false)
    );
    assert_eq!(cmd("watch foo\r\n"), rep(replies::ERROR, false));
    assert_eq!(cmd("watch fetchers deletions\r\n"), rep(replies::ERROR, false));
    // memcached takes noreply, then finds it is no log type.
    assert_eq!(cmd("watch noreply\r\n"), rep(replies::ERROR, true));
}

#[test]
fn slabs_forms() {
    assert_eq!(cmd("slabs automove 0\r\n"), adm(Admin::Automove { level: 0 }, false));
    assert_eq!(cmd("slabs automove 2 noreply\r\n"), adm(Admin::Automove { level: 2 }, true));
    assert_eq!(cmd("slabs automove 1 2 3\r\n"), adm(Admin::Automove { level: 1 }, false));
    // safe_strtoul truncates to 32 bits.
    assert_eq!(cmd("slabs automove 4294967296\r\n"), adm(Admin::Automove { level: 0 }, false));
    assert_eq!(cmd("slabs automove 3\r\n"), rep(replies::ERROR, false));
    assert_eq!(cmd("slabs automove\r\n"), rep(replies::ERROR, false));
    assert_eq!(cmd("slabs automove x\r\n"), rep(replies::BAD_FORMAT, false));
    assert_eq!(cmd("slabs automove -1\r\n"), rep(replies::BAD_FORMAT, false));
    assert_eq!(cmd("slabs automove ratio 0.5\r\n"), adm(Admin::AutomoveRatio { ratio: b"0.5" }, false));
    assert_eq!(cmd("slabs automove ratio\r\n"), rep(replies::ERROR, false));
    assert_eq!(cmd("slabs automove ratio x noreply\r\n"), rep(replies::ERROR, true));
    assert_eq!(cmd("slabs reassign 1 2\r\n"), adm(Admin::Reassign { classes: Some((1, 2)) }, false));
    assert_eq!(cmd("slabs reassign -1 2\r\n"), adm(Admin::Reassign { classes: Some((-1, 2)) }, false));
    assert_eq!(cmd("slabs reassign x y\r\n"), adm(Admin::Reassign { classes: None }, false));
    assert_eq!(cmd("slabs reassign 1\r\n"), rep(replies::ERROR, false));
    assert_eq!(cmd("slabs reassign 1 2 noreply\r\n"), rep(replies::ERROR, false));
    assert_eq!(cmd("slabs\r\n"), rep(replies::ERROR, false));
    assert_eq!(cmd("slabs foo bar\r\n"), rep(replies::ERROR, false));
}

#[test]
fn shutdown_forms() {
    assert_eq!(cmd("shutdown\r\n"), adm(Admin::Shutdown { graceful: Some(false) }, false));
    assert_eq!(cmd("shutdown graceful\r\n"), adm(Admin::Shutdown { graceful: Some(true) }, false));
    assert_eq!(cmd("shutdown noreply\r\n"), adm(Admin::Shutdown { graceful: None }, false));
    assert_eq!(cmd("shutdown graceful x\r\n"), adm(Admin::Shutdown { graceful: None }, false));
}

#[test]
fn strtod_like_c() {
    assert_eq!(safe_strtod(b"0.5"), Some(0.5));
    assert_eq!(safe_strtod(b" 1e2"), Some(100.0));
    assert_eq!(safe_strtod(b"inf"), Some(f64::INFINITY));
    assert_eq!(safe_strtod(b"1e999"), None);
    assert_eq!(safe_strtod(b""), None);
    assert_eq!(safe_strtod(b"x"), None);
}

fn arb_word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("on".to_string()),
        Just("dump".to_string()),
        Just("noreply".to_string()),
        Just("fetchers".to_string()),
        Just("ratio".to_string()),
        Just("graceful".to_string()),
        Just("automove".to_string()),
        Just("reassign".to_string()),
        (-5i64..5).prop_map(|n| n.to_string()),
        "[!-~]{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Any arguments give a command or one of memcached's error lines,
    /// and consume exactly the line.
    #[test]
    fn arbitrary_arguments(
        head in prop_oneof![Just("stats detail"), Just("watch"), Just("slabs"), Just("slabs automove"), Just("slabs reassign"), Just("shutdown")],
        args in proptest::collection::vec(arb_word(), 0..6),
    ) {
        let line = format!("{head} {}\r\n", args.join(" "));
        let p = parse(line.as_bytes(), &LIMITS).unwrap();
        prop_assert_eq!(p.consumed, line.len());
        let noreply = args.last().is_some_and(|a| a == "noreply");
        match p.command {
            Command::Admin { cmd: Admin::Watch { mask }, noreply: n } => {
                prop_assert_eq!(n, noreply);
                prop_assert!(mask != 0);
            }
            Command::Admin { cmd: Admin::Automove { level }, .. } => prop_assert!(level <= 2),
            Command::Admin { .. } => {}
            Command::Reply { text, .. } => prop_assert!(
                [replies::ERROR, replies::BAD_FORMAT, replies::DETAIL_USAGE].contains(&text)
            ),
            c => prop_assert!(false, "unexpected {:?}", c),
        }
    }

    /// Arbitrary bytes after an administrative command never panic.
    #[test]
    fn arbitrary_bytes(head in prop_oneof![Just("watch "), Just("slabs "), Just("shutdown "), Just("stats detail ")], tail in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut line = head.as_bytes().to_vec();
        line.extend(tail.iter().map(|&b| if b == b'\n' { b' ' } else { b }));
        line.extend_from_slice(b"\r\n");
        let p = parse(&line, &LIMITS).unwrap();
        prop_assert_eq!(p.consumed, line.len());
    }

    /// The levels memcached accepts parse back.
    #[test]
    fn automove_levels(level in 0u32..3, noreply: bool) {
        let line = format!("slabs automove {level}{}\r\n", if noreply { " noreply" } else { "" });
        prop_assert_eq!(parse(line.as_bytes(), &LIMITS).unwrap().command, adm(Admin::Automove { level }, noreply));
    }

    /// Any two numbers make a reassign request.
    #[test]
    fn reassign_numbers(src: i32, dst: i32) {
        let line = format!("slabs reassign {src} {dst}\r\n");
        prop_assert_eq!(parse(line.as_bytes(), &LIMITS).unwrap().command, adm(Admin::Reassign { classes: Some((src, dst)) }, false));
    }
}
