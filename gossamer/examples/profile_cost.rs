//! What profiling and wait tracking cost: the same three delegation
//! figures with everything off, with wait tracking on, with one other
//! trust profiled (filtered out on the cold path), and with everything
//! profiled; the modes interleaved round by round, each figure the median.
//!
//! `cargo run --release --example profile_cost` (add `-- --quick`).

use std::hint::black_box;
use std::time::Instant;

use gossamer::profile::Target;
use gossamer::Runtime;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Off,
    Waits,
    OtherTrust,
    All,
}

const MODES: [(Mode, &str); 4] = [
    (Mode::Off, "off"),
    (Mode::Waits, "wait tracking"),
    (Mode::OtherTrust, "another trust profiled"),
    (Mode::All, "everything profiled"),
];

/// ns per operation of: a round trip (one fiber), 64 fibers' `apply`s to
/// one trustee, and the local shortcut.
fn figures(rt: &Runtime, n: u64) -> [f64; 3] {
    rt.block_on(move || {
        let remote = gossamer::trustee(1).entrust(0u64);
        let local = gossamer::local_trustee().entrust(0u64);
        let t0 = Instant::now();
        for _ in 0..n / 4 {
            black_box(remote.apply(|v| {
                *v += 1;
                *v
            }));
        }
        let rtt = t0.elapsed().as_nanos() as f64 / (n / 4) as f64;

        let t0 = Instant::now();
        let hs: Vec<_> = (0..64)
            .map(|_| {
                let r = remote.clone();
                gossamer::spawn_on(0, move || {
                    for _ in 0..n / 64 {
                        r.apply(|v| *v += 1);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let many = t0.elapsed().as_nanos() as f64 / (n / 64 * 64) as f64;

        let t0 = Instant::now();
        for _ in 0..n {
            local.apply(|v| *v += 1);
        }
        let shortcut = t0.elapsed().as_nanos() as f64 / n as f64;
        [rtt, many, shortcut]
    })
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (runs, n) = if quick { (3, 100_000u64) } else { (5, 1_000_000u64) };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    let other = rt.trustee(1).entrust(0u8);
    let mut got: Vec<Vec<[f64; 3]>> = vec![Vec::new(); MODES.len()];
    for _ in 0..runs {
        for (i, (mode, _)) in MODES.iter().enumerate() {
            rt.profile_off();
            rt.track_waits(*mode == Mode::Waits);
            match mode {
                Mode::OtherTrust => rt.profile(Target::trust(&other)),
                Mode::All => rt.profile(Target::All),
                _ => {}
            }
            got[i].push(figures(&rt, n));
            rt.profile_reset();
        }
    }
    rt.profile_off();
    rt.track_waits(false);
    println!("gossamer profile cost: 2 workers on {cores} cores, median of {runs} interleaved runs, ns per operation");
    println!("{:<24} {:>18} {:>22} {:>18}", "mode", "apply round trip", "64 fibers, 1 trustee", "local shortcut");
    for (i, (_, name)) in MODES.iter().enumerate() {
        let f = |k: usize| median(got[i].iter().map(|r| r[k]).collect());
        println!("{:<24} {:>18.1} {:>22.1} {:>18.2}", name, f(0), f(1), f(2));
    }
}
