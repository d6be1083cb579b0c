//! What a generated program is made of, and how proptest draws one.
//!
//! A program is a list of operations run by one driver fiber. Operations
//! name trust handles by index modulo the number the driver holds (an
//! operation with no handle to act on is skipped), so that shrinking can
//! remove any operation and the rest still means something.

use proptest::prelude::*;

/// One step of the driver fiber.
#[derive(Clone, Debug)]
pub enum Op {
    /// Entrust a new property on thread `on` (modulo the thread count),
    /// as a plain property or inside a `Latch`.
    Entrust { on: u8, latch: bool },
    /// Entrust a new property with `gossamer::entrust` (the runtime picks
    /// a local trustee).
    Spread { latch: bool },
    /// `apply_with(push tag)` (`launch_with` on a latch), waiting.
    Apply { h: u8 },
    /// `apply_then(count a hit)` (`launch_then` on a latch).
    ApplyThen { h: u8 },
    /// `apply_with_then(push tag)` (`launch_then` on a latch).
    ApplyWithThen { h: u8 },
    /// `try_apply_then(count a hit, then panic or not)`; on a latch, a
    /// `launch_then` that counts a hit.
    TryApplyThen { h: u8, panics: bool },
    /// Clone handle `h`.
    Clone { h: u8 },
    /// Drop handle `h`.
    Drop { h: u8 },
    /// Start a fiber on thread `on` that takes a clone of handle `h` and
    /// pushes `n` tags through it (half of them with `then` callbacks when
    /// `then`); `with` starts it with `spawn_with` even when the thread is
    /// local.
    Spawn { h: u8, on: u8, n: u8, then: bool, with: bool },
    /// Join the oldest fiber not yet joined.
    Join,
    /// Let other fibers of the driver's thread run.
    Yield,
}

/// A whole generated program.
#[derive(Clone, Debug)]
pub struct Program {
    /// Worker threads of each process.
    pub threads_per_process: usize,
    /// The driver's operations.
    pub ops: Vec<Op>,
    /// Keep the handles still held at the end into the runtime's shutdown
    /// (instead of dropping them first).
    pub keep_at_end: bool,
    /// End with `rt.shutdown()` rather than dropping the runtime (one
    /// process only).
    pub explicit_shutdown: bool,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<u8>(), any::<bool>()).prop_map(|(on, latch)| Op::Entrust { on, latch }),
        1 => any::<bool>().prop_map(|latch| Op::Spread { latch }),
        4 => any::<u8>().prop_map(|h| Op::Apply { h }),
        3 => any::<u8>().prop_map(|h| Op::ApplyThen { h }),
        3 => any::<u8>().prop_map(|h| Op::ApplyWithThen { h }),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(h, panics)| Op::TryApplyThen { h, panics }),
        3 => any::<u8>().prop_map(|h| Op::Clone { h }),
        3 => any::<u8>().prop_map(|h| Op::Drop { h }),
        2 => (any::<u8>(), any::<u8>(), 1..6u8, any::<bool>(), any::<bool>())
            .prop_map(|(h, on, n, then, with)| Op::Spawn { h, on, n, then, with }),
        1 => Just(Op::Join),
        1 => Just(Op::Yield),
    ]
}

/// Programs of up to `max_ops` operations over `1..=max_threads` threads
/// per process.
pub fn program(max_threads: usize, max_ops: usize) -> impl Strategy<Value = Program> {
    (1..=max_threads, prop::collection::vec(op(), 1..=max_ops), any::<bool>(), any::<bool>()).prop_map(
        |(threads_per_process, ops, keep_at_end, explicit_shutdown)| Program {
            threads_per_process,
            ops,
            keep_at_end,
            explicit_shutdown,
        },
    )
}

/// The program as text, one operation a line, for the environment of the
/// processes that run it (the same binary parses it back).
pub fn encode(p: &Program) -> String {
    let mut s = format!("{} {} {}\n", p.threads_per_process, p.keep_at_end as u8, p.explicit_shutdown as u8);
    for op in &p.ops {
        let line = match *op {
            Op::Entrust { on, latch } => format!("E {on} {}", latch as u8),
            Op::Spread { latch } => format!("S {}", latch as u8),
            Op::Apply { h } => format!("A {h}"),
            Op::ApplyThen { h } => format!("T {h}"),
            Op::ApplyWithThen { h } => format!("W {h}"),
            Op::TryApplyThen { h, panics } => format!("P {h} {}", panics as u8),
            Op::Clone { h } => format!("C {h}"),
            Op::Drop { h } => format!("D {h}"),
            Op::Spawn { h, on, n, then, with } => format!("F {h} {on} {n} {} {}", then as u8, with as u8),
            Op::Join => "J".into(),
            Op::Yield => "Y".into(),
        };
        s.push_str(&line);
        s.push('\n');
    }
    s
}

/// Parses what [`encode`] wrote.
pub fn decode(s: &str) -> Program {
    let mut lines = s.lines();
    let head: Vec<usize> = lines.next().unwrap().split(' ').map(|x| x.parse().unwrap()).collect();
    let ops = lines
        .map(|l| {
            let mut w = l.split(' ');
            let kind = w.next().unwrap();
            let n: Vec<u8> = w.map(|x| x.parse().unwrap()).collect();
            match kind {
                "E" => Op::Entrust { on: n[0], latch: n[1] != 0 },
                "S" => Op::Spread { latch: n[0] != 0 },
                "A" => Op::Apply { h: n[0] },
                "T" => Op::ApplyThen { h: n[0] },
                "W" => Op::ApplyWithThen { h: n[0] },
                "P" => Op::TryApplyThen { h: n[0], panics: n[1] != 0 },
                "C" => Op::Clone { h: n[0] },
                "D" => Op::Drop { h: n[0] },
                "F" => Op::Spawn { h: n[0], on: n[1], n: n[2], then: n[3] != 0, with: n[4] != 0 },
                "J" => Op::Join,
                "Y" => Op::Yield,
                other => panic!("unknown operation {other:?}"),
            }
        })
        .collect();
    Program { threads_per_process: head[0], ops, keep_at_end: head[1] != 0, explicit_shutdown: head[2] != 0 }
}
