//! Safe code cannot corrupt memory through the trust layer in one process:
//! re-entering one's own property, requests and launches that outlive
//! their trust, a latch's value reached while a launched closure holds it,
//! shutdown with cycles and with drops that delegate, and trust ids.

mod common;
use common::{rt, within};

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use gossamer::{Latch, Trust};

/// The value a live [`Probe`] holds; dropping it writes something else.
const LIVE: u64 = 0xaaaa_5555_aaaa_5555;

/// A property that notices being used after its drop: every closure on it
/// checks `alive`, and its drop is counted.
struct Probe {
    alive: u64,
    data: Vec<u64>,
    drops: Arc<AtomicUsize>,
    dead_uses: Arc<AtomicUsize>,
}

impl Probe {
    fn new(drops: &Arc<AtomicUsize>, dead_uses: &Arc<AtomicUsize>) -> Probe {
        Probe { alive: LIVE, data: vec![LIVE; 64], drops: drops.clone(), dead_uses: dead_uses.clone() }
    }

    /// What every closure does: check that the value is alive, then use it.
    fn touch(&mut self) {
        if self.alive != LIVE || self.data.first() != Some(&LIVE) {
            DEAD_USES.fetch_add(1, Ordering::SeqCst);
            return;
        }
        self.data.push(LIVE);
        if self.data.len() > 128 {
            self.data.truncate(64);
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.alive = 0;
        self.drops.fetch_add(1, Ordering::SeqCst);
        let _ = &self.dead_uses;
    }
}

/// Uses of a dropped probe, for closures that cannot reach the test's own
/// counters (they capture nothing).
static DEAD_USES: AtomicUsize = AtomicUsize::new(0);
/// Tests that count `DEAD_USES` run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn wait_until(secs: u64, f: impl Fn() -> bool) -> bool {
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    f()
}

// ----- 1: re-entering one's own property -----------------------------------

/// A property whose closures log what they see, and may hold a trust to
/// themselves.
#[derive(Default)]
struct Journal {
    log: Vec<&'static str>,
    depth: u32,
    me: Option<Trust<Journal>>,
    buf: Vec<u64>,
}

static JOURNAL: OnceLock<Trust<Journal>> = OnceLock::new();

#[test]
fn reentering_own_property() {
    within(60, || {
        let rt = rt(2);
        let (through_static, through_self) = rt.block_on(|| {
            // Through a static: the closure reaches its own property's trust.
            let t = gossamer::local_trustee().entrust(Journal::default());
            let _ = JOURNAL.set(t.clone());
            let probe = t.clone();
            probe.apply_then(
                |j| {
                    j.depth += 1;
                    j.buf = vec![LIVE; 32];
                    let held: &Vec<u64> = &j.buf;
                    j.log.push("outer-start");
                    JOURNAL.get().unwrap().apply_then(
                        |j| {
                            j.log.push(if j.depth == 0 { "inner-alone" } else { "inner-nested" });
                            j.buf = Vec::new();
                        },
                        |()| {},
                    );
                    // `apply` there would block: refused at once.
                    let blocked = catch_unwind(AssertUnwindSafe(|| JOURNAL.get().unwrap().apply(|j| j.depth)));
                    j.log.push(if blocked.is_err() { "apply-refused" } else { "apply-ran" });
                    // The outer closure still reads through its borrow.
                    let first = held.first().copied();
                    j.log.push(if first == Some(LIVE) { "outer-borrow-intact" } else { "outer-borrow-dangling" });
                    j.depth -= 1;
                },
                |()| {},
            );
            for _ in 0..10 {
                gossamer::yield_now();
            }
            let a = t.apply(|j| j.log.iter().map(|s| s.to_string()).collect::<Vec<_>>());

            // Through the property itself: it holds a trust to itself.
            let s = gossamer::local_trustee().entrust(Journal::default());
            let me = s.clone();
            s.apply_with(|j, me: Trust<Journal>| j.me = Some(me), me);
            s.apply_then(
                |j| {
                    j.depth += 1;
                    j.log.push("outer-start");
                    j.me.as_ref()
                        .unwrap()
                        .apply_then(|j| j.log.push(if j.depth == 0 { "inner-alone" } else { "inner-nested" }), |()| {});
                    j.log.push("outer-end");
                    j.depth -= 1;
                },
                |()| {},
            );
            for _ in 0..10 {
                gossamer::yield_now();
            }
            let b = s.apply(|j| {
                j.me = None;
                j.log.iter().map(|s| s.to_string()).collect::<Vec<_>>()
            });
            (a, b)
        });
        assert_eq!(through_static, ["outer-start", "apply-refused", "outer-borrow-intact", "inner-alone"]);
        assert_eq!(through_self, ["outer-start", "outer-end", "inner-alone"]);
    });
}

// ----- 2: requests outliving their trust -----------------------------------

#[test]
fn requests_outlive_their_trust() {
    let _s = serial();
    within(60, || {
        DEAD_USES.store(0, Ordering::SeqCst);
        let drops = Arc::new(AtomicUsize::new(0));
        let dead = Arc::new(AtomicUsize::new(0));
        let rt = rt(3);
        for _ in 0..20 {
            let (d, x) = (drops.clone(), dead.clone());
            rt.block_on(move || {
                // Worker 2 issues; worker 1 drops the last trust; both to
                // trustee 0, which is kept busy meanwhile so that both arrive
                // while the issuer's request waits behind its batch.
                gossamer::spawn_on(2, move || {
                    let slow = gossamer::trustee(0).entrust(0u8);
                    let t = gossamer::trustee(0).entrust(Probe::new(&d, &x));
                    slow.apply_then(|_| std::thread::sleep(Duration::from_millis(20)), |()| {});
                    // Published now: what follows waits behind this batch.
                    gossamer::yield_now();
                    for _ in 0..8 {
                        t.apply_then(|p| p.touch(), |()| {});
                    }
                    gossamer::spawn_on(1, move || drop(t)).join().unwrap();
                    slow.apply(|_| ());
                })
                .join()
                .unwrap();
            });
        }
        assert!(wait_until(10, || drops.load(Ordering::SeqCst) == 20), "each probe dropped");
        drop(rt);
        assert_eq!(DEAD_USES.load(Ordering::SeqCst), 0, "requests ran on a dropped property");
        assert_eq!(drops.load(Ordering::SeqCst), 20, "each probe dropped exactly once");
    });
}

#[test]
fn requests_outlive_their_trust_on_plain_threads() {
    let _s = serial();
    within(60, || {
        DEAD_USES.store(0, Ordering::SeqCst);
        let drops = Arc::new(AtomicUsize::new(0));
        let dead = Arc::new(AtomicUsize::new(0));
        let rt = rt(2);
        const ROUNDS: usize = 200;
        for _ in 0..ROUNDS {
            let t = rt.trustee(1).entrust(Probe::new(&drops, &dead));
            // A fiber clones the trust for plain threads (the clones' toggles
            // travel its lane); the original comes back and is dropped here
            // (its toggle travels the injection queue), racing them.
            let (t, clones) = rt.block_on(move || {
                let clones: Vec<_> = (0..4).map(|_| t.clone()).collect();
                (t, clones)
            });
            drop(t);
            let hs: Vec<_> = clones
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    std::thread::spawn(move || {
                        let f = c.apply_async(|p| p.touch());
                        if i % 2 == 0 {
                            c.apply_then(|p| p.touch(), |()| {});
                        }
                        drop(c);
                        drop(f);
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        }
        assert!(wait_until(10, || drops.load(Ordering::SeqCst) == ROUNDS), "each probe dropped");
        drop(rt);
        assert_eq!(DEAD_USES.load(Ordering::SeqCst), 0, "requests ran on a dropped property");
        assert_eq!(drops.load(Ordering::SeqCst), ROUNDS, "each probe dropped exactly once");
    });
}

// ----- 3: launch_then outliving its trust ----------------------------------

#[test]
fn launch_then_outlives_its_trust() {
    let _s = serial();
    within(60, || {
        DEAD_USES.store(0, Ordering::SeqCst);
        let drops = Arc::new(AtomicUsize::new(0));
        let dead = Arc::new(AtomicUsize::new(0));
        let rt = rt(2);
        let (d, x) = (drops.clone(), dead.clone());
        let ran = rt.block_on(move || {
            let ran = std::rc::Rc::new(std::cell::Cell::new(0u32));
            for _ in 0..20 {
                let t = gossamer::trustee(1).entrust(Latch::new(Probe::new(&d, &x)));
                let r = ran.clone();
                t.launch_then(
                    |p| {
                        for _ in 0..3 {
                            gossamer::yield_now();
                        }
                        p.touch();
                    },
                    move |()| r.set(r.get() + 1),
                );
                drop(t);
            }
            while ran.get() < 20 {
                gossamer::yield_now();
            }
            ran.get()
        });
        assert_eq!(ran, 20);
        assert!(wait_until(10, || drops.load(Ordering::SeqCst) == 20), "each latch dropped");
        drop(rt);
        assert_eq!(DEAD_USES.load(Ordering::SeqCst), 0, "launched closures ran on a dropped property");
        assert_eq!(drops.load(Ordering::SeqCst), 20);
    });
}

// ----- 4: latch aliasing ----------------------------------------------------

static HELD: AtomicBool = AtomicBool::new(false);
static RELEASE: AtomicBool = AtomicBool::new(false);

#[test]
fn latch_aliasing() {
    let _s = serial();
    within(60, || {
        HELD.store(false, Ordering::SeqCst);
        RELEASE.store(false, Ordering::SeqCst);
        let rt = rt(2);
        let (refused, seen) = rt.block_on(|| {
            let t = gossamer::trustee(1).entrust(Latch::new(vec![LIVE; 32]));
            let seen = std::rc::Rc::new(std::cell::Cell::new(0u64));
            let s = seen.clone();
            t.launch_then(
                |v| {
                    let held: &Vec<u64> = v;
                    HELD.store(true, Ordering::SeqCst);
                    while !RELEASE.load(Ordering::SeqCst) {
                        gossamer::yield_now();
                    }
                    // Allocate what a freed buffer would be reused for, then
                    // read through the borrow.
                    let other = vec![0u64; 32];
                    let intact = held.len() == 32 && held.iter().all(|&x| x == LIVE);
                    drop(other);
                    if intact {
                        LIVE
                    } else {
                        1
                    }
                },
                move |r| s.set(r),
            );
            while !HELD.load(Ordering::SeqCst) {
                gossamer::yield_now();
            }
            // Reach the value mutably while the launched closure holds it.
            let refused = catch_unwind(AssertUnwindSafe(|| t.apply(|l| *l.get_mut() = Vec::new()))).is_err();
            let refused_replace =
                catch_unwind(AssertUnwindSafe(|| t.apply(|l| drop(std::mem::replace(l, Latch::new(Vec::new()))))))
                    .is_err();
            RELEASE.store(true, Ordering::SeqCst);
            while seen.get() == 0 {
                gossamer::yield_now();
            }
            // Once released, the value is reachable again.
            assert_eq!(t.apply(|l| l.get_mut().len()), 32);
            ((refused, refused_replace), seen.get())
        });
        assert_eq!(seen, LIVE, "the launched closure's borrow stayed valid");
        assert_eq!(refused, (true, true), "reaching the held latch's value is refused");
    });
}

// ----- 5: shutdown with a cycle ---------------------------------------------

/// A property that holds a trust to another and uses it when dropped.
struct Node {
    probe: Probe,
    next: Option<Trust<Node>>,
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(n) = &self.next {
            n.apply_then(|n| n.probe.touch(), |()| {});
        }
    }
}

#[test]
fn shutdown_with_a_cycle() {
    let _s = serial();
    within(60, || {
        DEAD_USES.store(0, Ordering::SeqCst);
        let drops = Arc::new(AtomicUsize::new(0));
        let dead = Arc::new(AtomicUsize::new(0));
        for placement in [(0, 0), (0, 1), (1, 0)] {
            let rt = rt(2);
            let (d, x) = (drops.clone(), dead.clone());
            rt.block_on(move || {
                let a = gossamer::trustee(placement.0).entrust(Node { probe: Probe::new(&d, &x), next: None });
                let b = gossamer::trustee(placement.1).entrust(Node { probe: Probe::new(&d, &x), next: None });
                a.apply_with(|a, b: Trust<Node>| a.next = Some(b), b.clone());
                b.apply_with(|b, a: Trust<Node>| b.next = Some(a), a.clone());
                // A self-cycle as well.
                let c = gossamer::trustee(placement.1).entrust(Node { probe: Probe::new(&d, &x), next: None });
                c.apply_with(|c, me: Trust<Node>| c.next = Some(me), c.clone());
            });
            drop(rt);
        }
        assert_eq!(DEAD_USES.load(Ordering::SeqCst), 0, "a drop at shutdown reached a dropped property");
        assert_eq!(drops.load(Ordering::SeqCst), 9, "every property of the cycles dropped exactly once");
    });
}

// ----- 16: shutdown drop order vs the local shortcut ------------------------

#[test]
fn shutdown_drop_order_vs_local_shortcut() {
    let _s = serial();
    within(60, || {
        DEAD_USES.store(0, Ordering::SeqCst);
        let drops = Arc::new(AtomicUsize::new(0));
        let dead = Arc::new(AtomicUsize::new(0));
        let rt = rt(2);
        let (d, x) = (drops.clone(), dead.clone());
        // Entrust A, then B, on one trustee; B's trust moves into A, whose
        // drop delegates to B. A trust to A outlives the runtime.
        let keep = rt.block_on(move || {
            let a = gossamer::trustee(1).entrust(Node { probe: Probe::new(&d, &x), next: None });
            let b = gossamer::trustee(1).entrust(Node { probe: Probe::new(&d, &x), next: None });
            a.apply_with(|a, b: Trust<Node>| a.next = Some(b), b);
            a
        });
        drop(rt);
        drop(keep);
        assert_eq!(DEAD_USES.load(Ordering::SeqCst), 0, "a closure ran on a property dropped at shutdown");
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    });
}

// ----- 17: trust id collisions ---------------------------------------------

#[test]
fn trust_id_collisions() {
    let _s = serial();
    within(60, || {
        DEAD_USES.store(0, Ordering::SeqCst);
        let drops = Arc::new(AtomicUsize::new(0));
        let dead = Arc::new(AtomicUsize::new(0));
        // As if every worker had already issued 2^40 ids (≈ 13 days at a
        // million clones a second).
        let rt = gossamer::Runtime::builder().workers(3).trust_ids_issued(1 << 40).build().unwrap();
        let (d, x) = (drops.clone(), dead.clone());
        let ids = Arc::new(Mutex::new(Vec::new()));
        let ids2 = ids.clone();
        let gone_early = rt.block_on(move || {
            let t = gossamer::trustee(0).entrust(Probe::new(&d, &x));
            let clones: Vec<Trust<Probe>> = [1usize, 2]
                .into_iter()
                .map(|w| {
                    let t = t.clone();
                    gossamer::spawn_on(w, move || t.clone()).join().unwrap()
                })
                .collect();
            for c in &clones {
                ids2.lock().unwrap().push(format!("{c:?}"));
            }
            drop(t);
            // Let every toggle arrive.
            for c in &clones {
                c.apply(|_| ());
            }
            let gone = d.load(Ordering::SeqCst);
            for c in &clones {
                c.apply(|p| p.touch());
            }
            gone
        });
        assert_eq!(gone_early, 0, "the property was dropped while trusts remained: {:?}", ids.lock().unwrap());
        assert!(wait_until(10, || drops.load(Ordering::SeqCst) == 1));
        drop(rt);
        assert_eq!(DEAD_USES.load(Ordering::SeqCst), 0);
        assert_eq!(drops.load(Ordering::SeqCst), 1);

        // At the very end of a worker's id space, a clone is refused with a
        // clear panic rather than reusing an id.
        let rt = gossamer::Runtime::builder().workers(3).trust_ids_issued((1 << 61) - 1).build().unwrap();
        let msg = rt.block_on(|| {
            let t = gossamer::local_trustee().entrust(7u32);
            let r = catch_unwind(AssertUnwindSafe(|| t.clone()));
            assert_eq!(t.apply(|v| *v), 7, "the property is untouched");
            match r {
                Ok(c) => format!("cloned: {c:?}"),
                Err(p) => p.downcast_ref::<String>().cloned().unwrap_or_default(),
            }
        });
        assert!(msg.contains("trust ids"), "{msg}");
    });
}
