//! Runs a generated program in a driver fiber while keeping the model of
//! what it must have done, and compares the two.
//!
//! The model is exact: every tag pushed (by the driver or a fiber it
//! started) must be in its property's log once, the tags of one fiber in
//! the order it issued them; every hit counted once; every `then`
//! callback run once; every property dropped once, on its trustee, with
//! exactly that state.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

use gossamer::JoinHandle;

use super::program::{Op, Program};
use super::property::{Handle, Record, PLANNED_PANIC};

/// Every wait of a generated program gives up after this long.
pub const WAIT: Duration = Duration::from_secs(20);

/// What the model expects of one property.
#[derive(Clone, Debug, Default)]
pub struct Expect {
    pub tags: Vec<u32>,
    pub hits: u64,
    /// Its trustee.
    pub trustee: usize,
}

/// The `then` callbacks that ran (or must run) on the driver's thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Callbacks {
    tags: Vec<u32>,
    hits: usize,
    oks: usize,
    errs: usize,
}

/// The model of a whole run: the expected final state of each property.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub props: BTreeMap<u32, Expect>,
}

/// Keeps the planned panics of generated programs off the output.
pub fn quiet_planned_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let planned = info.payload().downcast_ref::<String>().is_some_and(|s| s == PLANNED_PANIC);
            if !planned {
                previous(info);
            }
        }));
    });
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WAIT, "generated program: gave up waiting for {what} after {WAIT:?}");
        gossamer::yield_now();
    }
}

/// The body of a fiber a program starts: pushes `n` tags from `base`
/// through its own clone of a handle, every other one with a callback when
/// `then`, and checks what came back.
fn fiber_body((h, base, n, then): (Handle, u32, u8, bool)) -> u8 {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let mut want = Vec::new();
    for i in 0..n as u32 {
        let tag = base + i;
        if then && i % 2 == 1 {
            let seen = seen.clone();
            h.push_then(tag, move |t| seen.borrow_mut().push(t));
            want.push(tag);
        } else {
            assert_eq!(h.push(tag), tag, "apply_with returned another tag");
        }
    }
    wait_until("a fiber's callbacks", || seen.borrow().len() >= want.len());
    let mut got = seen.borrow().clone();
    got.sort_unstable();
    assert_eq!(got, want, "a fiber's callbacks ran once each");
    n
}

/// Whether the driver may drop its last trust to a property while its own
/// requests to it are still queued or running: yes, since the runtime keeps
/// the property alive until they have run (README, "Reference counting").
/// `GOSSAMER_GENERATED_IN_FLIGHT=0` makes the driver wait for them first,
/// to tell a failure of that rule from others.
fn in_flight_drops() -> bool {
    std::env::var_os("GOSSAMER_GENERATED_IN_FLIGHT").is_none_or(|v| v != "0")
}

fn is_local(thread: usize) -> bool {
    gossamer::topology().local().contains(&thread)
}

/// Runs the program's operations in the calling fiber and returns the
/// model, and the handles kept for the shutdown when the program keeps
/// them (after checking the state of their properties).
pub fn drive(p: &Program) -> (Model, Vec<Handle>) {
    let threads = gossamer::topology().threads();
    let mut model = Model::default();
    let mut handles: Vec<(u32, Handle)> = Vec::new();
    let mut fibers: VecDeque<(JoinHandle<u8>, u8)> = VecDeque::new();
    let seen = Rc::new(RefCell::new(Callbacks::default()));
    let mut expect = Callbacks::default();
    let (mut next_prop, mut next_tag, mut next_fiber) = (0u32, 0u32, 1u32);
    let pick = |handles: &Vec<(u32, Handle)>, h: u8| -> Option<(u32, Handle)> {
        (!handles.is_empty()).then(|| handles[h as usize % handles.len()].clone())
    };
    for op in &p.ops {
        match *op {
            Op::Entrust { on, latch } => {
                let t = on as usize % threads;
                let id = next_prop;
                next_prop += 1;
                let h = if is_local(t) {
                    let trustee = gossamer::trustee(t);
                    if latch {
                        Handle::Latched(trustee.entrust(gossamer::Latch::new(super::property::Prop::new(id))))
                    } else {
                        Handle::Plain(trustee.entrust(super::property::Prop::new(id)))
                    }
                } else {
                    let f = gossamer::spawn_with(t, |(id, latch)| Handle::entrust_here(id, latch), (id, latch));
                    f.join().expect("entrusting in another process")
                };
                model.props.insert(id, Expect { trustee: t, ..Expect::default() });
                handles.push((id, h));
            }
            Op::Spread { latch } => {
                let id = next_prop;
                next_prop += 1;
                let h = if latch {
                    let t = gossamer::entrust(gossamer::Latch::new(super::property::Prop::new(id)));
                    model.props.insert(id, Expect { trustee: t.trustee().index(), ..Expect::default() });
                    Handle::Latched(t)
                } else {
                    let t = gossamer::entrust(super::property::Prop::new(id));
                    model.props.insert(id, Expect { trustee: t.trustee().index(), ..Expect::default() });
                    Handle::Plain(t)
                };
                handles.push((id, h));
            }
            Op::Apply { h } => {
                let Some((id, h)) = pick(&handles, h) else { continue };
                let tag = next_tag;
                next_tag += 1;
                assert_eq!(h.push(tag), tag, "apply_with returned another tag");
                model.props.get_mut(&id).unwrap().tags.push(tag);
            }
            Op::ApplyThen { h } => {
                let Some((id, h)) = pick(&handles, h) else { continue };
                let s = seen.clone();
                h.hit_then(move |_| s.borrow_mut().hits += 1);
                model.props.get_mut(&id).unwrap().hits += 1;
                expect.hits += 1;
            }
            Op::ApplyWithThen { h } => {
                let Some((id, h)) = pick(&handles, h) else { continue };
                let tag = next_tag;
                next_tag += 1;
                let s = seen.clone();
                h.push_then(tag, move |t| s.borrow_mut().tags.push(t));
                model.props.get_mut(&id).unwrap().tags.push(tag);
                expect.tags.push(tag);
            }
            Op::TryApplyThen { h, panics } => {
                let Some((id, h)) = pick(&handles, h) else { continue };
                let s = seen.clone();
                let errs = panics && matches!(h, Handle::Plain(_));
                h.try_hit_then(panics, move |r| match r {
                    Ok(_) => s.borrow_mut().oks += 1,
                    Err(_) => s.borrow_mut().errs += 1,
                });
                model.props.get_mut(&id).unwrap().hits += 1;
                if errs {
                    expect.errs += 1;
                } else {
                    expect.oks += 1;
                }
            }
            Op::Clone { h } => {
                let Some(pair) = pick(&handles, h) else { continue };
                handles.push(pair);
            }
            Op::Drop { h } => {
                if !handles.is_empty() {
                    let i = h as usize % handles.len();
                    let (id, h) = handles.remove(i);
                    if !in_flight_drops() && !handles.iter().any(|(other, _)| *other == id) {
                        // Wait until this thread's requests to the
                        // property have run (they run in issue order).
                        h.state();
                    }
                    drop(h);
                }
            }
            Op::Spawn { h, on, n, then, with } => {
                let Some((id, h)) = pick(&handles, h) else { continue };
                let t = on as usize % threads;
                let base = next_fiber << 16;
                next_fiber += 1;
                let arg = (h, base, n, then);
                let f = if with || !is_local(t) {
                    gossamer::spawn_with(t, fiber_body, arg)
                } else {
                    gossamer::spawn_on(t, move || fiber_body(arg))
                };
                model.props.get_mut(&id).unwrap().tags.extend(base..base + n as u32);
                fibers.push_back((f, n));
            }
            Op::Join => {
                if let Some((f, n)) = fibers.pop_front() {
                    assert_eq!(f.join().expect("a generated fiber failed"), n);
                }
            }
            Op::Yield => gossamer::yield_now(),
        }
    }
    for (f, n) in fibers {
        assert_eq!(f.join().expect("a generated fiber failed"), n);
    }
    expect.tags.sort_unstable();
    let settled = || {
        let mut s = seen.borrow().clone();
        s.tags.sort_unstable();
        assert!(
            s.tags.len() <= expect.tags.len() && s.hits <= expect.hits && s.oks <= expect.oks && s.errs <= expect.errs,
            "a callback ran more than once: ran {s:?}, issued {expect:?}"
        );
        s == expect
    };
    wait_until("the driver's callbacks", settled);
    // A callback that runs twice may run the second time a little later.
    for _ in 0..20 {
        gossamer::yield_now();
    }
    assert!(settled(), "callbacks changed after all had run: {:?}", seen.borrow());
    if !p.keep_at_end {
        return (model, Vec::new());
    }
    let mut checked = std::collections::BTreeSet::new();
    for (id, h) in &handles {
        if checked.insert(*id) {
            let (log, hits) = h.state();
            check_state(*id, &log, hits, &model.props[id]);
        }
    }
    (model, handles.into_iter().map(|(_, h)| h).collect())
}

/// Compares a property's state with the model.
pub fn check_state(id: u32, log: &[u32], hits: u64, e: &Expect) {
    let mut sorted = log.to_vec();
    sorted.sort_unstable();
    let mut want = e.tags.clone();
    want.sort_unstable();
    assert_eq!(sorted, want, "property {id}: every pushed tag once (log in run order: {log:?})");
    let mut last = BTreeMap::new();
    for &tag in log {
        if let Some(prev) = last.insert(tag >> 16, tag) {
            assert!(prev < tag, "property {id}: tags of one fiber ran out of issue order: {log:?}");
        }
    }
    assert_eq!(hits, e.hits, "property {id}: every hit counted once");
}

/// Compares the records of the dropped properties with the model: each
/// property dropped once, on its trustee, in the state the model expects.
/// `anywhere` accepts drops on any thread (the runtime may drop what is
/// left at shutdown from the thread that shuts it down).
pub fn check_records(records: &[Record], model: &Model, anywhere: bool) {
    let mut by_id: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
    for r in records {
        by_id.entry(r.id).or_default().push(r);
    }
    for (id, e) in &model.props {
        let rs = by_id.remove(id).unwrap_or_default();
        assert_eq!(rs.len(), 1, "property {id} dropped exactly once (records: {rs:?})");
        let r = rs[0];
        check_state(*id, &r.log, r.hits, e);
        if !anywhere {
            assert_eq!(r.dropped_on, Some(e.trustee), "property {id} dropped on its trustee");
        }
    }
    assert!(by_id.is_empty(), "records of properties the program never made: {by_id:?}");
}
