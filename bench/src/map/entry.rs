//! What the maps hold and how a run checks them: 8-byte keys, 16-byte
//! values `[tag, writes]` where `tag` is derived from the key (a read checks
//! it) and `writes` counts the updates of that entry (the audit sums them).

use std::collections::HashMap;
use std::ops::Add;

pub type Value = [u64; 2];

/// A mixing function (the splitmix64 finaliser).
#[inline(always)]
pub fn mix(k: u64) -> u64 {
    let mut z = k.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The shard of `k` among `n` (multiply-shift over the mixed key).
#[inline(always)]
pub fn shard_of(k: u64, n: usize) -> usize {
    ((mix(k) as u128 * n as u128) >> 64) as usize
}

/// The tag every value of key `k` carries.
#[inline(always)]
pub fn tag(k: u64) -> u64 {
    mix(k ^ 0xA5A5_A5A5)
}

/// The value a key starts with.
#[inline(always)]
pub fn initial(k: u64) -> Value {
    [tag(k), 0]
}

/// A read's check.
#[inline(always)]
pub fn read_ok(k: u64, v: Option<Value>) -> bool {
    v.is_some_and(|v| v[0] == tag(k))
}

/// A write: one more update of `k`'s value; false if `k` is missing.
#[inline(always)]
pub fn bump(v: Option<&mut Value>) -> bool {
    match v {
        Some(v) => {
            v[1] += 1;
            true
        }
        None => false,
    }
}

/// What a map holds, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Audit {
    pub len: u64,
    /// Entries whose tag does not match their key.
    pub bad: u64,
    /// Sum of the update counters.
    pub writes: u64,
}

impl Audit {
    pub fn entry(k: u64, v: &Value) -> Audit {
        Audit { len: 1, bad: (v[0] != tag(k)) as u64, writes: v[1] }
    }

    pub fn of(m: &HashMap<u64, Value>) -> Audit {
        m.iter().fold(Audit::default(), |a, (k, v)| a + Audit::entry(*k, v))
    }
}

impl Add for Audit {
    type Output = Audit;
    fn add(self, o: Audit) -> Audit {
        Audit { len: self.len + o.len, bad: self.bad + o.bad, writes: self.writes + o.writes }
    }
}

/// What the clients of one run did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Work {
    pub ops: u64,
    pub writes: u64,
    /// Reads or writes whose check failed.
    pub bad: u64,
}

impl Add for Work {
    type Output = Work;
    fn add(self, o: Work) -> Work {
        Work { ops: self.ops + o.ops, writes: self.writes + o.writes, bad: self.bad + o.bad }
    }
}

/// Checks the final table against everything the clients did.
pub fn verify(what: &str, audit: Audit, size: u64, work: Work, fault: bool) -> crate::error::Result<()> {
    use crate::error::expect_eq;
    expect_eq(&format!("{what}: entries"), audit.len, size)?;
    expect_eq(&format!("{what}: entries with a wrong value"), audit.bad, 0)?;
    expect_eq(&format!("{what}: failed reads or writes"), work.bad, 0)?;
    expect_eq(&format!("{what}: sum of update counters"), audit.writes, work.writes + fault as u64)
}
