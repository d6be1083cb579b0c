//! Map throughput with the lock-based maps: one OS thread per configured
//! thread, closed loop over its trace.

use std::thread;

use super::entry::{read_ok, verify, Value, Work};
use super::locked::{MutexShards, RwLockShards, SharedMap};
use super::{MapKind, Point};
use crate::control::{thread_wait, Control};
use crate::error::Result;
use crate::keys::{is_write, key, Trace};
use crate::machine::pin_current;
use crate::settings::Settings;

/// Runs `s.repeat` measurements; returns Mops/s of each.
pub fn run(s: &Settings, kind: MapKind, p: Point, traces: &[Trace]) -> Result<Vec<f64>> {
    match kind {
        MapKind::DashMap => run_map::<dashmap::DashMap<u64, Value>>(s, "dashmap", p, traces),
        MapKind::Scc => run_map::<scc::HashMap<u64, Value>>(s, "scc", p, traces),
        MapKind::Mutex512 => run_map::<MutexShards>(s, "mutex-512", p, traces),
        MapKind::RwLock512 => run_map::<RwLockShards>(s, "rwlock-512", p, traces),
    }
}

fn run_map<M: SharedMap>(s: &Settings, name: &str, p: Point, traces: &[Trace]) -> Result<Vec<f64>> {
    let map = M::prefilled(p.size, s.threads);
    let mut total = Work::default();
    let mut mops = Vec::with_capacity(s.repeat);
    for rep in 0..s.repeat {
        let ctl = Control::new();
        let (work, secs) = thread::scope(|sc| {
            let handles: Vec<_> = (0..s.threads)
                .map(|t| {
                    let (ctl, map) = (&ctl, &map);
                    let mut cur = traces[t].cursor(rep, s.repeat);
                    let pin = s.pin;
                    sc.spawn(move || {
                        if pin {
                            pin_current(t);
                        }
                        ctl.arrive(thread_wait);
                        let mut w = Work::default();
                        while !ctl.stopped() {
                            let e = cur.next_entry();
                            let k = key(e) as u64;
                            let ok = if is_write(e) {
                                w.writes += 1;
                                map.bump(k)
                            } else {
                                read_ok(k, map.get(k))
                            };
                            w.bad += !ok as u64;
                            w.ops += 1;
                        }
                        w
                    })
                })
                .collect();
            let start = ctl.drive(s.threads, s.duration);
            let work =
                handles.into_iter().map(|h| h.join().expect("map thread panicked")).fold(Work::default(), |a, b| a + b);
            (work, start.elapsed().as_secs_f64())
        });
        total = total + work;
        mops.push(work.ops as f64 / secs / 1e6);
    }
    verify(name, map.audit(), p.size, total, s.fault)?;
    Ok(mops)
}
