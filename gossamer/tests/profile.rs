//! Profiles count exactly what was asked: requests from many fibers,
//! local-shortcut hits, what the trustee served; targets select what is
//! counted; nothing is counted when profiling is off.

mod common;
use common::within;

use gossamer::profile::Target;

const FIBERS: u64 = 8;
const EACH: u64 = 250;

#[test]
fn requests_from_many_fibers_and_local_hits_are_counted_exactly() {
    within(120, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let counter = rt.trustee(1).entrust(0u64);
        let other = rt.trustee(1).entrust(0u32);
        rt.profile(Target::trust(&counter));
        // Fibers on worker 0 cross to trustee 1; fibers on worker 1 take
        // the local shortcut.
        let mut hs = Vec::new();
        for k in 0..FIBERS {
            let (c, o) = (counter.clone(), other.clone());
            hs.push(rt.spawn_on((k % 2) as usize, move || {
                for i in 0..EACH {
                    if i % 5 == 0 {
                        c.apply_then(|v| *v += 1, |()| {});
                    } else {
                        c.apply(|v| *v += 1);
                    }
                    o.apply(|v| *v += 1); // not profiled
                }
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
        let c = counter.clone();
        let total = rt.block_on(move || c.apply(|v| *v));
        assert_eq!(total, FIBERS * EACH);
        let p = rt.profile_snapshot();
        assert!(p.missing_workers.is_empty());
        assert_eq!(p.trusts.len(), 1, "only the chosen trust: {p}");
        let t = p.trust(counter.profile_id()).expect("profiled");
        // `FIBERS * EACH` from the fibers, one from the final read (worker 0).
        assert_eq!(t.requests, FIBERS * EACH + 1, "{p}");
        assert_eq!(t.local_hits, FIBERS / 2 * EACH, "{p}");
        assert_eq!(t.served, FIBERS / 2 * EACH + 1, "{p}");
        assert_eq!(t.requests, t.local_hits + t.served);
        assert_eq!(t.service.count(), t.served);
        // Waiting applies from worker 0: 4 of every 5, and the final read.
        assert_eq!(t.round_trip.count(), FIBERS / 2 * EACH * 4 / 5 + 1);
        assert_eq!(t.trustee, 1);
        assert_eq!(t.type_name, "u64");
        // Trustee counters were not asked for.
        assert!(p.trustees.is_empty());
        let text = p.to_string();
        assert!(text.contains("u64") && text.contains(&t.id.to_string()), "{text}");
    });
}

#[test]
fn a_trustee_target_counts_its_trusts_and_batches() {
    within(120, || {
        let rt = gossamer::Runtime::builder().workers(3).build().unwrap();
        let a = rt.trustee(1).entrust(vec![0u8]);
        let b = rt.trustee(2).entrust(0u64);
        rt.profile(Target::Trustee(1));
        let (a2, b2) = (a.clone(), b.clone());
        rt.block_on(move || {
            for _ in 0..100 {
                a2.apply(|v| v[0] = v[0].wrapping_add(1));
                b2.apply(|v| *v += 1);
            }
        });
        let p = rt.profile_snapshot();
        assert_eq!(p.trusts.len(), 1, "{p}");
        assert_eq!(p.trusts[0].type_name, "alloc::vec::Vec<u8>");
        assert_eq!(p.trusts[0].requests, 100);
        let t1 = p.trustee(1).expect("trustee 1 profiled");
        assert!(p.trustee(2).is_none());
        // Each waiting apply is its own batch here; the runtime's own
        // messages (trust clones and drops) may ride along.
        assert!(t1.batches_sent >= 100 && t1.requests_sent >= 100, "{t1:?}");
        assert_eq!(t1.batch_sizes.count(), t1.batches_sent);
        assert!(t1.batches_served >= t1.batches_sent.min(100));
        assert!(t1.requests_served >= 100);
        assert!(t1.queued.count() >= 1);
        drop((a, b));
    });
}

#[test]
fn nothing_is_counted_while_off_and_reset_zeroes() {
    within(120, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        assert!(!rt.profiling());
        let t = rt.trustee(1).entrust(0u64);
        let t2 = t.clone();
        rt.block_on(move || (0..50).for_each(|_| t2.apply(|v| *v += 1)));
        let p = rt.profile_snapshot();
        assert!(p.trusts.is_empty() && p.trustees.is_empty(), "{p}");

        rt.profile(Target::All);
        let t2 = t.clone();
        rt.block_on(move || (0..30).for_each(|_| t2.apply(|v| *v += 1)));
        rt.profile_off();
        let t2 = t.clone();
        rt.block_on(move || (0..20).for_each(|_| t2.apply(|v| *v += 1)));
        let p = rt.profile_snapshot();
        assert_eq!(p.trust(t.profile_id()).unwrap().requests, 30, "{p}");
        assert!(p.trustee(1).is_some());

        rt.profile_reset();
        assert!(rt.profile_snapshot().trusts.is_empty());
    });
}

#[test]
fn the_line_format_carries_every_trust() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).profile_all(true).build().unwrap();
        let t = rt.trustee(1).entrust(String::new());
        let t2 = t.clone();
        rt.block_on(move || (0..7).for_each(|_| t2.apply(|s| s.push('x'))));
        let p = rt.profile_snapshot();
        let lines = p.to_lines(rt.threads());
        assert!(lines.starts_with("gossamer-profile 1 "), "{lines}");
        assert!(lines.ends_with("end\n"));
        let row = lines.lines().find(|l| l.starts_with("trust ")).expect("a trust row");
        let f: Vec<&str> = row.splitn(11, ' ').collect();
        assert_eq!(f[1], format!("{:x}", t.profile_id().0));
        assert_eq!(f[3], "7");
        assert_eq!(f[10], "alloc::string::String");
        p.emit();
    });
}

#[test]
fn a_worker_keeps_a_bounded_number_of_trusts_apart() {
    within(120, || {
        let rt = gossamer::Runtime::builder().workers(2).profile_all(true).build().unwrap();
        let n = 3000u64;
        let trusts: Vec<_> = (0..n).map(|i| rt.trustee(1).entrust(i)).collect();
        let ts = trusts.clone();
        rt.block_on(move || {
            for t in &ts {
                t.apply(|v| *v += 1);
            }
        });
        let p = rt.profile_snapshot();
        // Every request is counted, the overflow summed in one entry.
        assert_eq!(p.trusts.iter().map(|t| t.requests).sum::<u64>(), n, "{p}");
        let other: Vec<_> = p.trusts.iter().filter(|t| t.type_name == "(other trusts)").collect();
        assert_eq!(other.len(), 1);
        assert!(other[0].requests > 0 && other[0].trustee == 1);
        assert!(p.trusts.len() <= 2 * 2048 + 2, "{}", p.trusts.len());
        drop(trusts);
    });
}
