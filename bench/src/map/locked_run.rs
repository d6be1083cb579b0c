//! Map throughput with the lock-based maps: one OS thread per configured
//! thread, closed loop over its trace.

use std::thread;

use super::entry::{read_ok, verify, Value, Work};
use super::locked::{MutexShards, ParkingLotShards, RwLockShards, SharedMap};
use super::{MapKind, Point};
use crate::control::{thread_wait, Control};
use crate::error::Result;
use crate::keys::{is_write, key, Trace};
use crate::machine::pin_current;
use crate::settings::Settings;

/// One measurement (repetition `rep`); returns Mops/s.
pub fn run(s: &Settings, kind: MapKind, p: Point, traces: &[Trace], rep: usize) -> Result<f64> {
    match kind {
        MapKind::DashMap => run_map::<dashmap::DashMap<u64, Value>>(s, "dashmap", p, traces, rep),
        MapKind::Scc => run_map::<scc::HashMap<u64, Value>>(s, "scc", p, traces, rep),
        MapKind::Mutex512 => run_map::<MutexShards>(s, "mutex-512", p, traces, rep),
        MapKind::ParkingLot512 => run_map::<ParkingLotShards>(s, "parking-lot-512", p, traces, rep),
        MapKind::RwLock512 => run_map::<RwLockShards>(s, "rwlock-512", p, traces, rep),
    }
}

fn run_map<M: SharedMap>(s: &Settings, name: &str, p: Point, traces: &[Trace], rep: usize) -> Result<f64> {
    let map = M::prefilled(p.size, s.threads);
    {
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
        verify(name, map.audit(), p.size, work, s.fault)?;
        Ok(work.ops as f64 / secs / 1e6)
    }
}
