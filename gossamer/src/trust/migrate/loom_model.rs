//! A `loom` model of a hand-over with direct routes: the origin, two
//! holders, and a client thread with requests in flight, exchanging
//! messages through one FIFO lane per pair of threads (as the worker lanes
//! do), while the origin moves the value from the first holder to the
//! second. The client follows the rules of `direct` (a counted route,
//! changed only with nothing outstanding, requests held back meanwhile);
//! the origin and the holders those of the module documentation (relay in
//! arrival order, drain during a hand-over, a holder's cell forwards once
//! the value left it). Once the hand-over is done the origin sweeps the
//! record it left (`origin`): it asks the client for its route back, and
//! frees the first holder's record when the client answers; the client
//! gives the route back once nothing it sent by it is outstanding, holding
//! what it issues meanwhile, and then sends through the origin, uncounted,
//! until the origin gives it a new route. Loom checks every interleaving
//! (up to a preemption bound) for exactly-once effect, issue order, and
//! that nothing reaches the freed record.

use std::collections::VecDeque;

use loom::sync::{Arc, Mutex};
use loom::thread;

/// Threads: the origin, the first holder, the second holder, the client.
const ORIGIN: usize = 0;
const FIRST: usize = 1;
const SECOND: usize = 2;
const CLIENT: usize = 3;
const THREADS: usize = 4;
/// Requests the client issues.
const OPS: u32 = 3;

#[derive(Clone, Copy, Debug)]
enum Msg {
    /// Run request `seq`; the result goes back to thread `to`.
    Req { seq: u32, to: usize },
    /// The result of `seq`, with where the sender saw the value.
    Done { seq: u32, hint: Option<usize> },
    /// Move the value on to thread `to` (from the origin to the holder).
    HandOver { to: usize },
    /// The hand-over finished (to the origin).
    HandedOver,
    /// Give the route back (from the origin, sweeping).
    Retire,
    /// The route is given back (to the origin).
    Retired,
}

/// What a cell of the property on one thread does with a request.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Cell {
    None,
    Here,
    Forward(usize),
    /// A record the sweep freed.
    Freed,
}

/// The client's route entry (see `direct::Entry`).
struct Entry {
    via: usize,
    next: Option<usize>,
    outstanding: u32,
    settled: bool,
    held: VecDeque<u32>,
    /// The origin asked for the route back.
    retiring: bool,
}

struct World {
    /// `lanes[from][to]`: FIFO.
    lanes: [[VecDeque<Msg>; THREADS]; THREADS],
    cells: [Cell; THREADS],
    /// The effects, in the order they ran.
    log: Vec<u32>,
    /// On the origin: draining (requests held), and what it holds.
    draining: bool,
    origin_held: VecDeque<(u32, usize)>,
    /// On relaying threads: per relayed `seq`, whom to answer.
    relayed: Vec<(usize, u32, usize)>,
    /// The client's route, while it keeps one.
    entry: Option<Entry>,
    /// Requests the client sent by its route (the others went through the
    /// origin, uncounted).
    counted: Vec<u32>,
    /// The origin freed the first holder's record.
    swept: bool,
    issued: u32,
    completed: u32,
    moved: bool,
}

impl World {
    fn send(&mut self, from: usize, to: usize, m: Msg) {
        self.lanes[from][to].push_back(m);
    }

    /// The forward of the origin record.
    fn origin_forward(&self) -> usize {
        match self.cells[ORIGIN] {
            Cell::Forward(t) => t,
            c => unreachable!("origin is {c:?}"),
        }
    }

    /// A request reaches thread `me` (not the origin).
    fn serve(&mut self, me: usize, seq: u32, to: usize) {
        match self.cells[me] {
            Cell::Here => {
                self.log.push(seq);
                self.send(me, to, Msg::Done { seq, hint: None });
            }
            Cell::Forward(t) => {
                self.relayed.push((me, seq, to));
                self.send(me, t, Msg::Req { seq, to: me });
            }
            Cell::None => panic!("request {seq} reached thread {me}, which never held the value"),
            Cell::Freed => panic!("request {seq} reached the record on thread {me} after the sweep freed it"),
        }
    }

    /// The client sends `seq` by its route.
    fn client_send(&mut self, seq: u32) {
        let e = self.entry.as_mut().expect("a route");
        let via = e.via;
        e.outstanding += 1;
        self.counted.push(seq);
        self.send(CLIENT, via, Msg::Req { seq, to: CLIENT });
    }

    fn client_issue(&mut self, seq: u32) {
        let Some(e) = self.entry.as_mut() else {
            // No route: through the origin, uncounted.
            return self.send(CLIENT, ORIGIN, Msg::Req { seq, to: CLIENT });
        };
        let changing = e.next.is_some() || !e.settled;
        if !e.held.is_empty() || (e.outstanding != 0 && (changing || e.retiring)) {
            e.held.push_back(seq);
            return;
        }
        if e.outstanding == 0 && e.settled {
            if let Some(n) = e.next.take() {
                e.via = n;
            }
        }
        self.client_send(seq);
    }

    /// The result of `seq` reaches the client from thread `from`.
    fn client_done(&mut self, seq: u32, hint: Option<usize>, from: usize) {
        match (self.entry.as_mut(), hint) {
            (Some(e), Some(h)) => e.next = (h != e.via).then_some(h),
            // Only the origin hands out a new route.
            (None, Some(h)) if from == ORIGIN => {
                self.entry = Some(Entry {
                    via: ORIGIN,
                    next: Some(h),
                    outstanding: 0,
                    settled: false,
                    held: VecDeque::new(),
                    retiring: false,
                })
            }
            _ => {}
        }
        self.completed += 1;
        let Some(i) = self.counted.iter().position(|&s| s == seq) else { return };
        self.counted.remove(i);
        let e = self.entry.as_mut().expect("a counted request outlives its route");
        e.outstanding -= 1;
        if e.outstanding != 0 {
            return;
        }
        e.settled = true;
        if e.retiring {
            // Give the route back; what was held goes through the origin.
            let held = std::mem::take(&mut e.held);
            self.entry = None;
            self.send(CLIENT, ORIGIN, Msg::Retired);
            for seq in held {
                self.send(CLIENT, ORIGIN, Msg::Req { seq, to: CLIENT });
            }
            return;
        }
        loop {
            let e = self.entry.as_mut().expect("a route");
            let changing = e.next.is_some() || !e.settled;
            if e.held.is_empty() || (e.outstanding != 0 && changing) {
                break;
            }
            if e.outstanding == 0 && e.settled {
                if let Some(n) = e.next.take() {
                    e.via = n;
                }
            }
            let seq = e.held.pop_front().unwrap();
            self.client_send(seq);
        }
    }

    /// One message from the lanes into `me`, if any; true if one ran.
    fn step(&mut self, me: usize) -> bool {
        let Some(from) = (0..THREADS).find(|&f| !self.lanes[f][me].is_empty()) else { return false };
        let m = self.lanes[from][me].pop_front().unwrap();
        match (me, m) {
            (ORIGIN, Msg::Req { seq, to }) => {
                if self.draining {
                    self.origin_held.push_back((seq, to));
                } else {
                    let t = self.origin_forward();
                    self.relayed.push((ORIGIN, seq, to));
                    self.send(ORIGIN, t, Msg::Req { seq, to: ORIGIN });
                }
            }
            (ORIGIN, Msg::HandedOver) => {
                self.cells[ORIGIN] = Cell::Forward(SECOND);
                self.draining = false;
                while let Some((seq, to)) = self.origin_held.pop_front() {
                    self.relayed.push((ORIGIN, seq, to));
                    self.send(ORIGIN, SECOND, Msg::Req { seq, to: ORIGIN });
                }
                // Sweep the record the hand-over left.
                self.send(ORIGIN, CLIENT, Msg::Retire);
            }
            (ORIGIN, Msg::Retired) => {
                assert!(!self.relayed.iter().any(|&(t, ..)| t == FIRST), "the swept record still relays a request");
                self.cells[FIRST] = Cell::Freed;
                self.swept = true;
            }
            (CLIENT, Msg::Retire) => match self.entry.as_mut() {
                Some(e) if e.outstanding != 0 || !e.held.is_empty() => e.retiring = true,
                _ => {
                    self.entry = None;
                    self.send(CLIENT, ORIGIN, Msg::Retired);
                }
            },
            (CLIENT, Msg::Done { seq, hint }) => self.client_done(seq, hint, from),
            (_, Msg::Done { seq, .. }) => {
                // A relayer passes the result back with its hint.
                let i = self.relayed.iter().position(|&(t, s, _)| t == me && s == seq).unwrap();
                let (_, _, to) = self.relayed.remove(i);
                let hint = match self.cells[me] {
                    Cell::Forward(t) => Some(t),
                    Cell::Freed => panic!("a result came back to the record on thread {me} after the sweep freed it"),
                    _ => None,
                };
                self.send(me, to, Msg::Done { seq, hint });
            }
            (_, Msg::Req { seq, to }) => self.serve(me, seq, to),
            (_, Msg::HandOver { to }) => {
                assert_eq!(self.cells[me], Cell::Here, "a hand-over reached a cell without the value");
                self.cells[to] = Cell::Here;
                self.cells[me] = Cell::Forward(to);
                self.send(me, ORIGIN, Msg::HandedOver);
            }
            (_, m) => unreachable!("{m:?} to thread {me}"),
        }
        true
    }

    fn finished(&self) -> bool {
        self.completed == OPS
            && self.moved
            && self.swept
            && !self.draining
            && self.lanes.iter().flatten().all(VecDeque::is_empty)
    }
}

fn world(via: usize, settled: bool, next: Option<usize>) -> Arc<Mutex<World>> {
    let mut cells = [Cell::None; THREADS];
    cells[ORIGIN] = Cell::Forward(FIRST);
    cells[FIRST] = Cell::Here;
    Arc::new(Mutex::new(World {
        lanes: Default::default(),
        cells,
        log: Vec::new(),
        draining: false,
        origin_held: VecDeque::new(),
        relayed: Vec::new(),
        entry: Some(Entry { via, next, outstanding: 0, settled, held: VecDeque::new(), retiring: false }),
        counted: Vec::new(),
        swept: false,
        issued: 0,
        completed: 0,
        moved: false,
    }))
}

/// Passes each thread makes over its lanes beside the others; whatever is
/// left is served after they joined (see `drain`), so the model has no
/// spin loop of its own.
const PASSES: usize = 2;

/// Serves what has reached `me`, `PASSES` times.
fn serve(w: &Mutex<World>, me: usize) {
    for _ in 0..PASSES {
        let mut g = w.lock().unwrap();
        while g.step(me) {}
    }
}

/// After every thread joined: serves all lanes until nothing moves.
fn drain(g: &mut World) {
    while (0..THREADS).any(|me| g.step(me)) {}
}

/// Runs one model: the client starts with route `via` (settled or not,
/// with a hint pending or not).
fn run(via: usize, settled: bool, next: Option<usize>) {
    let w = world(via, settled, next);
    let mut hs = Vec::new();
    for me in [FIRST, SECOND] {
        let w = w.clone();
        hs.push(thread::spawn(move || serve(&w, me)));
    }
    {
        // The origin: starts the hand-over at some point among its steps.
        let w = w.clone();
        hs.push(thread::spawn(move || {
            {
                let mut g = w.lock().unwrap();
                g.draining = true;
                let t = g.origin_forward();
                g.send(ORIGIN, t, Msg::HandOver { to: SECOND });
                g.moved = true;
            }
            serve(&w, ORIGIN);
        }));
    }
    // The client: issues its requests, serving its lane in between.
    for _ in 0..OPS {
        let mut g = w.lock().unwrap();
        let seq = g.issued;
        g.issued += 1;
        g.client_issue(seq);
        g.step(CLIENT);
    }
    for h in hs {
        h.join().unwrap();
    }
    let mut g = w.lock().unwrap();
    drain(&mut g);
    assert!(g.finished(), "every request completed, the move done");
    assert_eq!(g.log, (0..OPS).collect::<Vec<_>>(), "each request once, in issue order");
}

/// Checks `f` under loom, within the bounds every model of `migrate` uses.
pub(super) fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    // Bounded preemptions keep the search short (every lock of the world
    // is a point where loom may switch threads).
    b.preemption_bound = Some(3);
    b.max_branches = 100_000;
    b.check(f);
}

#[test]
fn loom_hand_over_with_a_client_through_the_origin() {
    // A fresh route entry: through the origin, not settled, no hint yet.
    model(|| run(ORIGIN, false, None));
}

#[test]
fn loom_hand_over_with_a_client_direct_to_the_holder() {
    // A client that already sends straight to the first holder.
    model(|| run(FIRST, true, None));
}

#[test]
fn loom_hand_over_with_a_client_about_to_switch() {
    // A client through the origin with the first holder as its pending
    // hint: it switches mid-stream, while the value moves on.
    model(|| run(ORIGIN, true, Some(FIRST)));
}
