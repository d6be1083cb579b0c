//! Fetch-and-add with locks: one OS thread per configured thread, each
//! locking a counter from an array of padded locks.

use std::hint::black_box;
use std::thread;

use crate::control::{thread_wait, Control};
use crate::error::{expect_eq, Result};
use crate::keys::{key, Trace};
use crate::locks::{Lock, LockKind, Padded};
use crate::machine::pin_current;
use crate::settings::Settings;
use crate::work::fetch_add;

/// One measurement (repetition `rep`) over `k` counters; returns Mops/s.
pub fn run<L: Lock<u64>>(s: &Settings, k: usize, traces: &[Trace], kind: LockKind, rep: usize) -> Result<f64> {
    let locks: Vec<Padded<L>> = (0..k).map(|_| Padded(L::new(0))).collect();
    let ctl = Control::new();
    let (ops, secs) = thread::scope(|sc| {
        let handles: Vec<_> = (0..s.threads)
            .map(|t| {
                let (ctl, locks) = (&ctl, &locks);
                let mut cur = traces[t].cursor(rep, s.repeat);
                let pin = s.pin;
                sc.spawn(move || {
                    if pin {
                        pin_current(t);
                    }
                    ctl.arrive(thread_wait);
                    let (mut ops, mut sum) = (0u64, 0u64);
                    while !ctl.stopped() {
                        let e = cur.next_entry();
                        sum = sum.wrapping_add(locks[key(e)].0.with(fetch_add));
                        ops += 1;
                    }
                    black_box(sum);
                    ops
                })
            })
            .collect();
        let start = ctl.drive(s.threads, s.duration);
        let ops: u64 = handles.into_iter().map(|h| h.join().expect("lock thread panicked")).sum();
        (ops, start.elapsed().as_secs_f64())
    });
    let counted: u64 = locks.iter().map(|l| l.0.with(|v| *v)).sum();
    expect_eq(&format!("sum of {kind} counters"), counted, ops + s.fault as u64)?;
    Ok(ops as f64 / secs / 1e6)
}
