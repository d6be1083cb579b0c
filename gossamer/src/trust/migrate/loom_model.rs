//! A `loom` model of a hand-over with direct routes: the origin, two
//! holders, and a client thread with requests in flight, exchanging
//! messages through one FIFO lane per pair of threads (as the worker lanes
//! do), while the origin moves the value from the first holder to the
//! second. The client follows the rules of `direct` (a counted route,
//! changed only with nothing outstanding, requests held back meanwhile);
//! the origin and the holders those of the module documentation (relay in
//! arrival order, drain during a hand-over, a holder's cell forwards once
//! the value left it). Loom checks every interleaving (up to a preemption
//! bound) for exactly-once effect and issue order.

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
}

/// What a cell of the property on one thread does with a request.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Cell {
    None,
    Here,
    Forward(usize),
}

/// The client's route entry (see `direct::Entry`).
struct Entry {
    via: usize,
    next: Option<usize>,
    outstanding: u32,
    settled: bool,
    held: VecDeque<u32>,
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
    entry: Entry,
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
        }
    }

    /// The client sends `seq` by its route.
    fn client_send(&mut self, seq: u32) {
        let via = self.entry.via;
        self.entry.outstanding += 1;
        self.send(CLIENT, via, Msg::Req { seq, to: CLIENT });
    }

    fn client_issue(&mut self, seq: u32) {
        let e = &mut self.entry;
        let changing = e.next.is_some() || !e.settled;
        if !e.held.is_empty() || (e.outstanding != 0 && changing) {
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

    fn client_done(&mut self, hint: Option<usize>) {
        let e = &mut self.entry;
        if let Some(h) = hint {
            e.next = (h != e.via).then_some(h);
        }
        e.outstanding -= 1;
        self.completed += 1;
        if e.outstanding != 0 {
            return;
        }
        e.settled = true;
        loop {
            let e = &mut self.entry;
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
            }
            (CLIENT, Msg::Done { hint, .. }) => self.client_done(hint),
            (_, Msg::Done { seq, .. }) => {
                // A relayer passes the result back with its hint.
                let i = self.relayed.iter().position(|&(t, s, _)| t == me && s == seq).unwrap();
                let (_, _, to) = self.relayed.remove(i);
                let hint = match self.cells[me] {
                    Cell::Forward(t) => Some(t),
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
        self.completed == OPS && self.moved && !self.draining && self.lanes.iter().flatten().all(VecDeque::is_empty)
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
        entry: Entry { via, next, outstanding: 0, settled, held: VecDeque::new() },
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

fn model(f: impl Fn() + Sync + Send + 'static) {
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
