//! Decoding the commands of the `gossamer top` socket. A line comes from
//! another process and is hostile until parsed: it is bounded
//! ([`MAX_LINE`]), split into at most [`MAX_WORDS`] words, and every number
//! is checked against the bounds of what it sets; anything else is an
//! error naming what was wrong, never a panic.

use std::time::Duration;

use super::top_adaptive::POLICIES;
use super::top_follow::{FollowChange, KEYS as FOLLOW_KEYS};
use super::tuning::{DedicatedPolicy, TrusteeParams};

/// The longest command line, in bytes (its newline excluded).
pub(crate) const MAX_LINE: usize = 1024;
/// The most words in one command.
const MAX_WORDS: usize = 16;

/// One trustee parameter, as the socket names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    TightPolls,
    IdleSpinUs,
    SleepPollUs,
    FiberYield,
}

impl Key {
    pub(crate) const ALL: [Key; 4] = [Key::TightPolls, Key::IdleSpinUs, Key::SleepPollUs, Key::FiberYield];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Key::TightPolls => "tight_polls",
            Key::IdleSpinUs => "idle_spin_us",
            Key::SleepPollUs => "sleep_poll_us",
            Key::FiberYield => "fiber_yield",
        }
    }

    /// The value of this key in `p`.
    pub(crate) fn get(self, p: &TrusteeParams) -> u64 {
        match self {
            Key::TightPolls => u64::from(p.tight_polls),
            Key::IdleSpinUs => p.idle_spin.as_micros() as u64,
            Key::SleepPollUs => p.sleep_poll.as_micros() as u64,
            Key::FiberYield => u64::from(p.fiber_yield),
        }
    }

    /// `p` with this key set to `v` (bounds are checked afterwards, by
    /// `TrusteeParams::check`; here only what does not fit the type).
    pub(crate) fn set(self, p: &mut TrusteeParams, v: u64) -> Result<(), String> {
        let small = || u32::try_from(v).map_err(|_| format!("{} = {v} is too large", self.name()));
        match self {
            Key::TightPolls => p.tight_polls = small()?,
            Key::FiberYield => p.fiber_yield = small()?,
            Key::IdleSpinUs => p.idle_spin = Duration::from_micros(v),
            Key::SleepPollUs => p.sleep_poll = Duration::from_micros(v),
        }
        Ok(())
    }
}

/// One decoded command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    ProfileAll,
    ProfileOff,
    ProfileTrustee(usize),
    Reset,
    Snapshot,
    Stuck,
    /// The dedicated count, its policy and every trustee's parameters.
    Settings,
    /// `dedicated K` or `dedicated auto`.
    Dedicated(DedicatedPolicy),
    /// `set all|N key=value …`: parameters of one trustee or of all.
    Set {
        trustee: Option<usize>,
        changes: Vec<(Key, u64)>,
    },
    /// Every adaptive property: its policy and current mode.
    Adaptive,
    /// `policy ID delegate|adaptive|lock`: the policy of one adaptive
    /// property, by its profile id (hexadecimal, `0x` optional).
    Policy {
        id: u64,
        policy: &'static str,
    },
    /// Every property that follows its requests: holder, on or off, moves
    /// and parameters.
    Follow,
    /// `follow ID [on|off] [key=value …]`: pause or resume one property
    /// that follows its requests, or change its parameters.
    FollowSet {
        id: u64,
        change: FollowChange,
    },
}

/// A trust id as `snapshot` and `adaptive` write it: 1 to 16 hexadecimal
/// digits, with or without `0x`.
fn trust_id(s: &str) -> Result<u64, String> {
    let digits = s.strip_prefix("0x").unwrap_or(s);
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("trust id {:?} is not a hexadecimal id (as `adaptive` lists them)", clip(s)));
    }
    u64::from_str_radix(digits, 16).map_err(|_| format!("trust id {:?} is too large", clip(s)))
}

fn number(what: &str, s: &str) -> Result<u64, String> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} {:?} is not a number", clip(s)));
    }
    s.parse().map_err(|_| format!("{what} {:?} is too large", clip(s)))
}

fn index(what: &str, s: &str) -> Result<usize, String> {
    usize::try_from(number(what, s)?).map_err(|_| format!("{what} {:?} is too large", clip(s)))
}

/// At most 32 characters of `s`, for error messages.
pub(crate) fn clip(s: &str) -> String {
    s.chars().take(32).collect()
}

/// Decodes one command line (without its newline).
pub(crate) fn parse(line: &str) -> Result<Command, String> {
    if line.len() > MAX_LINE {
        return Err(format!("command longer than {MAX_LINE} bytes"));
    }
    let words: Vec<&str> = line.split_ascii_whitespace().take(MAX_WORDS + 1).collect();
    if words.len() > MAX_WORDS {
        return Err(format!("more than {MAX_WORDS} words"));
    }
    Ok(match words.as_slice() {
        ["profile", "all"] => Command::ProfileAll,
        ["profile", "off"] => Command::ProfileOff,
        ["profile", "trustee", n] => Command::ProfileTrustee(index("trustee", n)?),
        ["reset"] => Command::Reset,
        ["snapshot"] => Command::Snapshot,
        ["stuck"] => Command::Stuck,
        ["settings"] => Command::Settings,
        ["adaptive"] => Command::Adaptive,
        ["policy", id, p] => Command::Policy {
            id: trust_id(id)?,
            policy: POLICIES
                .into_iter()
                .find(|known| known == p)
                .ok_or_else(|| format!("unknown policy {:?} (known: {})", clip(p), POLICIES.join(", ")))?,
        },
        ["follow"] => Command::Follow,
        ["follow", id, rest @ ..] => Command::FollowSet { id: trust_id(id)?, change: follow_change(rest)? },
        ["dedicated", "auto"] => Command::Dedicated(DedicatedPolicy::Auto),
        ["dedicated", k] => Command::Dedicated(DedicatedPolicy::Fixed(index("dedicated count", k)?)),
        ["set", target, pairs @ ..] => {
            let trustee = match *target {
                "all" => None,
                n => Some(index("trustee", n)?),
            };
            if pairs.is_empty() {
                return Err("set needs at least one key=value".into());
            }
            let mut changes = Vec::with_capacity(pairs.len());
            for pair in pairs {
                let (k, v) = pair.split_once('=').ok_or_else(|| format!("{:?} is not key=value", clip(pair)))?;
                let key = Key::ALL.into_iter().find(|key| key.name() == k).ok_or_else(|| {
                    let known: Vec<_> = Key::ALL.iter().map(|k| k.name()).collect();
                    format!("unknown parameter {:?} (known: {})", clip(k), known.join(", "))
                })?;
                changes.push((key, number(key.name(), v)?));
            }
            Command::Set { trustee, changes }
        }
        _ => return Err(format!("unknown command {:?}", clip(line))),
    })
}

/// The words after `follow ID`: `on` or `off` at most once, then
/// `key=value` pairs of the policy's parameters (each at most once);
/// something to change at least. Bounds are checked where they are known,
/// with the property's other parameters.
fn follow_change(words: &[&str]) -> Result<FollowChange, String> {
    let mut change = FollowChange::default();
    for w in words {
        match *w {
            "on" | "off" if change.on.is_none() && change.params.is_empty() => change.on = Some(*w == "on"),
            "on" | "off" => return Err("give on or off once, before the parameters".into()),
            pair => {
                let (k, v) =
                    pair.split_once('=').ok_or_else(|| format!("{:?} is not on, off or key=value", clip(pair)))?;
                let key = FOLLOW_KEYS
                    .iter()
                    .position(|known| *known == k)
                    .ok_or_else(|| format!("unknown parameter {:?} (known: {})", clip(k), FOLLOW_KEYS.join(", ")))?;
                if change.params.iter().any(|&(i, _)| i == key) {
                    return Err(format!("{} given twice", FOLLOW_KEYS[key]));
                }
                change.params.push((key, number(FOLLOW_KEYS[key], v)?));
            }
        }
    }
    if change.on.is_none() && change.params.is_empty() {
        return Err("follow ID needs on, off or key=value".into());
    }
    Ok(change)
}

/// `params` with `changes` applied, checked against their bounds.
pub(crate) fn apply(params: TrusteeParams, changes: &[(Key, u64)]) -> Result<TrusteeParams, String> {
    let mut p = params;
    for &(k, v) in changes {
        k.set(&mut p, v)?;
    }
    p.check().map_err(|e| e.to_string())?;
    Ok(p)
}

/// The `params` line of trustee `t`.
pub(crate) fn params_line(t: usize, p: &TrusteeParams) -> String {
    let mut s = format!("params {t}");
    for k in Key::ALL {
        s.push_str(&format!(" {}={}", k.name(), k.get(p)));
    }
    s.push('\n');
    s
}

#[cfg(all(test, not(loom), not(miri)))]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn commands_decode() {
        assert_eq!(parse("dedicated 1"), Ok(Command::Dedicated(DedicatedPolicy::Fixed(1))));
        assert_eq!(parse(" dedicated   auto "), Ok(Command::Dedicated(DedicatedPolicy::Auto)));
        assert_eq!(
            parse("set all idle_spin_us=5 tight_polls=0"),
            Ok(Command::Set { trustee: None, changes: vec![(Key::IdleSpinUs, 5), (Key::TightPolls, 0)] })
        );
        assert_eq!(parse("settings"), Ok(Command::Settings));
        assert_eq!(parse("adaptive"), Ok(Command::Adaptive));
        assert_eq!(parse("policy 0x7f00aa lock"), Ok(Command::Policy { id: 0x7f00aa, policy: "lock" }));
        assert_eq!(parse("policy 7F00AA delegate"), Ok(Command::Policy { id: 0x7f00aa, policy: "delegate" }));
        assert_eq!(parse("follow"), Ok(Command::Follow));
        assert_eq!(
            parse("follow 0x7f00aa off"),
            Ok(Command::FollowSet { id: 0x7f00aa, change: FollowChange { on: Some(false), params: vec![] } })
        );
        assert_eq!(
            parse("follow 7f00aa on window=64 rest_windows=0"),
            Ok(Command::FollowSet {
                id: 0x7f00aa,
                change: FollowChange { on: Some(true), params: vec![(0, 64), (4, 0)] }
            })
        );
        assert_eq!(
            parse("follow 10 share_percent=70"),
            Ok(Command::FollowSet { id: 0x10, change: FollowChange { on: None, params: vec![(2, 70)] } })
        );
        for bad in [
            "dedicated",
            "dedicated -1",
            "dedicated 99999999999999999999999",
            "set",
            "set all",
            "set x tight_polls=1",
            "set 0 tight_polls",
            "set 0 spin=1",
            "set 0 tight_polls=+1",
            "set 0 tight_polls=1e3",
            "profile trustee",
            "hello",
            "adaptive all",
            "policy",
            "policy 0x10",
            "policy 0x10 sometimes",
            "policy 0x lock",
            "policy 0xg1 lock",
            "policy -1 lock",
            "policy 0x11112222333344445 lock",
            "policy 0x10 lock extra",
            "follow 0x10",
            "follow 0x10 maybe",
            "follow 0x10 on off",
            "follow 0x10 window=16 on",
            "follow 0x10 window=16 window=32",
            "follow 0x10 window",
            "follow 0x10 window=-1",
            "follow 0x10 size=16",
            "follow zz on",
            "follow on",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} decoded");
        }
        assert!(parse(&"x ".repeat(600)).is_err());
        assert!(parse(&"set 0 tight_polls=1 ".repeat(9)).is_err());
    }

    #[test]
    fn out_of_bounds_values_are_refused() {
        let p = TrusteeParams::default();
        assert!(apply(p, &[(Key::TightPolls, u64::from(u32::MAX) + 1)]).is_err());
        assert!(apply(p, &[(Key::FiberYield, 0)]).is_err());
        assert!(apply(p, &[(Key::SleepPollUs, 0)]).is_err());
        assert!(apply(p, &[(Key::IdleSpinUs, u64::MAX)]).is_err());
        assert_eq!(apply(p, &[(Key::IdleSpinUs, 7)]).unwrap().idle_spin, Duration::from_micros(7));
    }

    fn key() -> impl Strategy<Value = Key> {
        prop::sample::select(Key::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn any_line_decodes_or_is_refused_without_panic(line in "\\PC{0,200}") {
            let _ = parse(&line);
        }

        #[test]
        fn any_words_of_the_vocabulary_decode_or_are_refused(
            words in prop::collection::vec(
                prop::sample::select(vec![
                    "set", "all", "dedicated", "auto", "profile", "trustee", "0", "1", "18446744073709551616",
                    "tight_polls=3", "idle_spin_us=", "=5", "sleep_poll_us=100", "fiber_yield=99999999999",
                    "adaptive", "policy", "0x7f", "ffffffffffffffffff", "lock", "delegate", "0x",
                    "follow", "on", "off", "window=16", "share_percent=99999999999999999999", "rest_windows=",
                ]),
                0..20,
            )
        ) {
            let _ = parse(&words.join(" "));
        }

        #[test]
        fn policy_commands_round_trip(id in any::<u64>(), p in prop::sample::select(POLICIES.to_vec()),
                                      prefix in any::<bool>(), upper in any::<bool>()) {
            let hex = if upper { format!("{id:X}") } else { format!("{id:x}") };
            let line = format!("policy {}{hex} {p}", if prefix { "0x" } else { "" });
            prop_assert_eq!(parse(&line), Ok(Command::Policy { id, policy: p }));
        }

        #[test]
        fn follow_commands_round_trip(id in any::<u64>(), on in prop::option::of(any::<bool>()),
                                      params in prop::collection::btree_map(0..FOLLOW_KEYS.len(), any::<u64>(), 0..5)) {
            prop_assume!(on.is_some() || !params.is_empty());
            let mut line = format!("follow {id:x}");
            if let Some(on) = on {
                line.push_str(if on { " on" } else { " off" });
            }
            for (k, v) in &params {
                line.push_str(&format!(" {}={v}", FOLLOW_KEYS[*k]));
            }
            let change = FollowChange { on, params: params.into_iter().collect() };
            prop_assert_eq!(parse(&line), Ok(Command::FollowSet { id, change }));
        }

        #[test]
        fn set_commands_round_trip(
            trustee in prop::option::of(0usize..1000),
            changes in prop::collection::vec((key(), any::<u64>()), 1..8),
        ) {
            let target = trustee.map_or("all".to_string(), |t| t.to_string());
            let pairs: Vec<String> = changes.iter().map(|(k, v)| format!("{}={v}", k.name())).collect();
            let line = format!("set {target} {}", pairs.join(" "));
            prop_assert_eq!(parse(&line), Ok(Command::Set { trustee, changes: changes.clone() }));
            // Applying never panics; what it accepts is within bounds.
            if let Ok(p) = apply(TrusteeParams::default(), &changes) {
                prop_assert!(p.check().is_ok());
            }
        }
    }
}
