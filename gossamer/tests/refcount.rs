//! Trust reference counting: clone and drop anywhere, the property is
//! dropped exactly once, after its last trust.

mod common;
use common::{rt, within};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use gossamer::Trust;

/// A property that counts its drops.
struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn wait_for(drops: &AtomicUsize, n: usize) {
    for _ in 0..2000 {
        if drops.load(Ordering::SeqCst) >= n {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn last_drop_on_another_thread_drops_the_property_once() {
    within(60, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(3);
        let d = drops.clone();
        rt.block_on(move || {
            let t = gossamer::trustee(2).entrust(Counted(d));
            let clones: Vec<_> = (0..50).map(|_| t.clone()).collect();
            drop(t);
            let hs: Vec<_> = clones
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    gossamer::spawn_on(i % 2, move || {
                        c.apply(|_| ());
                        let c2 = c.clone();
                        drop(c);
                        c2.apply(|_| ());
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
        wait_for(&drops, 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "shutdown must not drop it again");
    });
}

#[test]
fn clone_inside_delegated_context_keeps_the_property_alive() {
    within(60, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(2);
        let d = drops.clone();
        rt.block_on(move || {
            type Registry = Vec<(Trust<Counted>, Trust<Counted>)>;
            let inner = gossamer::trustee(1).entrust(Counted(d));
            // A registry on trustee 0, filled from a closure running on trustee 1.
            let registry: Trust<Registry> = gossamer::trustee(0).entrust(Vec::new());
            let keep = gossamer::trustee(1).entrust(0u8);
            // Clone and drop inside delegated context: trustee 1's closure
            // clones a trust to its own property twice and drops the original.
            keep.apply_with(
                |_, (inner2, reg2): (Trust<Counted>, Trust<Registry>)| {
                    let a = inner2.clone();
                    let b = inner2.clone();
                    drop(inner2);
                    reg2.apply_with_then(|r, ab| r.push(ab), (a, b), |()| {});
                },
                (inner.clone(), registry.clone()),
            );
            drop(inner);
            // Trustee 1 sends the registration asynchronously.
            while registry.apply(|r| r.len()) == 0 {
                gossamer::yield_now();
            }
            // The registry holds the only two trusts: the property lives.
            let v = registry.apply(|r| r[0].0.clone());
            v.apply(|_| ());
            registry.apply(|r| r.clear()); // drops inside delegated context
            drop(v);
        });
        wait_for(&drops, 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn trusts_dropped_outside_the_runtime_and_after_shutdown_are_safe() {
    within(60, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(2);
        let a = rt.entrust(Counted(drops.clone()));
        let b = a.clone();
        std::thread::spawn(move || drop(b)).join().unwrap();
        drop(a);
        wait_for(&drops, 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1);

        // A trust that outlives its runtime: the runtime drops the property
        // at shutdown; the late drop of the trust does nothing.
        let late = rt.entrust(Counted(drops.clone()));
        late.apply(|_| ());
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        drop(late);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn properties_owning_trusts_to_each_other_drop_cleanly_at_shutdown() {
    within(60, || {
        let drops = Arc::new(AtomicUsize::new(0));
        {
            let rt = rt(2);
            let d = drops.clone();
            rt.block_on(move || {
                let leaf = gossamer::trustee(1).entrust(Counted(d.clone()));
                let holder = gossamer::trustee(1).entrust((Counted(d), Some(leaf.clone())));
                // A cycle through the holder keeps both alive until shutdown.
                holder.apply_with(
                    |h, again| {
                        std::mem::forget(again);
                        if let Some(l) = h.1.as_ref() {
                            l.apply_then(|_| (), |()| {});
                        }
                    },
                    holder.clone(),
                );
                drop(leaf);
            });
        }
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn a_chain_of_last_trusts_is_dropped_without_other_traffic() {
    within(60, || {
        for workers in [1, 2] {
            let drops = Arc::new(AtomicUsize::new(0));
            let rt = rt(workers);
            let d = drops.clone();
            rt.block_on(move || {
                // Three properties on one trustee, each holding the only
                // trust to the next: dropping the first drops them all, each
                // after a fence round of its own, with nothing else to wake
                // the trustee.
                let on = gossamer::trustee(workers - 1);
                let c = on.entrust((Counted(d.clone()), None::<Trust<()>>));
                let b = on.entrust((Counted(d.clone()), Some(c)));
                let a = on.entrust((Counted(d), Some(b)));
                drop(a);
            });
            wait_for(&drops, 3);
            assert_eq!(drops.load(Ordering::SeqCst), 3, "every link dropped once, promptly ({workers} workers)");
            drop(rt);
            assert_eq!(drops.load(Ordering::SeqCst), 3);
        }
    });
}
