//! A `loom` model of records that relay to records, and a sweep that
//! frees them, with the rule of `direct::note`: a record's hint changes
//! only a route that leads to that record.
//!
//! The property has moved four times: its value is in `H` on thread `C`,
//! and three records are left, each forwarding to the next: `R1` on `B`,
//! `R2` on `A`, `R3` on the origin's thread. Client thread `C` keeps a
//! route that leads to `R1`; thread `B` keeps a route of its own, given
//! by the origin after the sweep began (so it takes no part in it), still
//! through the origin. A request by `C`'s route hops `R1 → R2 → R3 → H`,
//! and each record's result goes back to the thread of the hop before it,
//! with that record's hint: `R2`'s reaches `B`, naming `R3`. The origin
//! sweeps the three records at some point among its steps: it asks `C`
//! for its route back and frees them once `C` answers (after its requests
//! by the route completed). Loom checks every interleaving (up to a
//! preemption bound) for: no request or result reaches a freed record,
//! and every request runs once; then `B` sends one more request by the
//! route it keeps.
//!
//! With the rule `direct::note` had before (any hint from a record
//! updates a route the thread keeps), `B` takes `R3` as its next route and
//! that last request reaches `R3` after the sweep freed it: the model
//! fails.

use std::collections::VecDeque;

use loom::sync::{Arc, Mutex};
use loom::thread;

/// Threads.
const ORIGIN: usize = 0;
const A: usize = 1;
const B: usize = 2;
const C: usize = 3;
const THREADS: usize = 4;

/// Cells, and the thread each one lives on.
const O: usize = 0;
const R3: usize = 1;
const R2: usize = 2;
const R1: usize = 3;
const H: usize = 4;
const CELLS: usize = 5;
const HOME: [usize; CELLS] = [ORIGIN, ORIGIN, A, B, C];

/// Requests each client issues.
const OPS: u32 = 2;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Cell {
    Here,
    Forward(usize),
    /// A record the sweep freed.
    Freed,
}

/// A relaying record's hint: it forwards to `at`.
#[derive(Clone, Copy, Debug)]
struct Hint {
    from: usize,
    at: usize,
    /// The origin tells it.
    create: bool,
}

#[derive(Clone, Copy, Debug)]
enum Msg {
    /// Run request `id` on `cell` (or relay it); the result goes to thread
    /// `to`.
    Req { id: u32, cell: usize, to: usize },
    /// The result of `id`, with the relaying record's hint.
    Done { id: u32, hint: Option<Hint> },
    /// Give the route back (from the origin, sweeping).
    Retire,
    /// The route is given back (to the origin).
    Retired,
    /// Free a record (from the origin, the sweep done).
    Free { cell: usize },
}

/// A client thread's route (see `direct::Entry`): `None` is the origin.
struct Entry {
    via: Option<usize>,
    next: Option<usize>,
    outstanding: u32,
    settled: bool,
    held: VecDeque<u32>,
    retiring: bool,
}

/// A request a record relayed: on `thread`, from record `rec`, its result
/// to go back to thread `to`.
struct Relay {
    thread: usize,
    id: u32,
    rec: usize,
    to: usize,
}

struct World {
    /// `lanes[from][to]`: FIFO.
    lanes: [[VecDeque<Msg>; THREADS]; THREADS],
    cells: [Cell; CELLS],
    /// Per thread, its route, while it keeps one.
    entries: [Option<Entry>; THREADS],
    /// Per thread, the ids it sent by its route and not yet completed.
    counted: [Vec<u32>; THREADS],
    relays: Vec<Relay>,
    /// The ids of the requests that ran.
    ran: Vec<u32>,
    completed: u32,
    swept: bool,
}

impl World {
    fn send(&mut self, from: usize, to: usize, m: Msg) {
        self.lanes[from][to].push_back(m);
    }

    /// Follows the records of thread `me` from `cell`: the first cell of
    /// another thread, or `Err` with a cell of `me` that holds the value.
    fn resolve(&self, me: usize, mut cell: usize) -> Result<usize, usize> {
        while HOME[cell] == me {
            match self.cells[cell] {
                Cell::Here => return Err(cell),
                Cell::Forward(next) => cell = next,
                Cell::Freed => panic!("thread {me} followed its record {cell} after the sweep freed it"),
            }
        }
        Ok(cell)
    }

    /// `direct::first_hop`: where requests by route `via` of `me` go first.
    fn first_hop(&self, me: usize, via: Option<usize>) -> usize {
        self.resolve(me, via.unwrap_or(O)).unwrap_or_else(|here| here)
    }

    /// `direct::note` on thread `me`.
    fn note(&mut self, me: usize, hint: Option<Hint>) {
        let Some(h) = hint else { return };
        let Some(e) = self.entries[me].as_ref() else { return };
        if h.create || self.first_hop(me, e.via) == h.from {
            let e = self.entries[me].as_mut().unwrap();
            e.next = (e.via != Some(h.at)).then_some(h.at);
        }
    }

    /// Sends request `id` from `me` to `cell` (through `me`'s records).
    fn go(&mut self, me: usize, id: u32, cell: usize) {
        match self.resolve(me, cell) {
            Ok(cell) => self.send(me, HOME[cell], Msg::Req { id, cell, to: me }),
            Err(_) => {
                // The value is here: runs at once.
                self.ran.push(id);
                self.client_done(me, id);
            }
        }
    }

    fn client_send(&mut self, me: usize, id: u32) {
        let e = self.entries[me].as_mut().expect("a route");
        e.outstanding += 1;
        let via = e.via;
        self.counted[me].push(id);
        self.go(me, id, via.unwrap_or(O));
    }

    fn client_issue(&mut self, me: usize, id: u32) {
        let Some(e) = self.entries[me].as_mut() else {
            // No route: through the origin, uncounted.
            return self.go(me, id, O);
        };
        let changing = e.next.is_some() || !e.settled;
        if !e.held.is_empty() || (e.outstanding != 0 && (changing || e.retiring)) {
            e.held.push_back(id);
            return;
        }
        if e.outstanding == 0 && e.settled {
            if let Some(n) = e.next.take() {
                e.via = Some(n);
            }
        }
        self.client_send(me, id);
    }

    /// A request `me` issued completed.
    fn client_done(&mut self, me: usize, id: u32) {
        self.completed += 1;
        let Some(i) = self.counted[me].iter().position(|&s| s == id) else { return };
        self.counted[me].remove(i);
        let e = self.entries[me].as_mut().expect("a counted request outlives its route");
        e.outstanding -= 1;
        if e.outstanding != 0 {
            return;
        }
        e.settled = true;
        if e.retiring {
            let held = std::mem::take(&mut e.held);
            self.entries[me] = None;
            self.send(me, ORIGIN, Msg::Retired);
            for id in held {
                self.go(me, id, O);
            }
            return;
        }
        loop {
            let e = self.entries[me].as_mut().expect("a route");
            let changing = e.next.is_some() || !e.settled;
            if e.held.is_empty() || (e.outstanding != 0 && changing) {
                break;
            }
            if e.outstanding == 0 && e.settled {
                if let Some(n) = e.next.take() {
                    e.via = Some(n);
                }
            }
            let id = e.held.pop_front().unwrap();
            self.client_send(me, id);
        }
    }

    /// Request `id` for `cell` reaches `me`.
    fn serve(&mut self, me: usize, id: u32, cell: usize, to: usize) {
        match self.cells[cell] {
            Cell::Here => {
                self.ran.push(id);
                self.send(me, to, Msg::Done { id, hint: None });
            }
            Cell::Forward(_) => {
                // Relayed: onward through this thread's records.
                self.relays.push(Relay { thread: me, id, rec: cell, to });
                match self.resolve(me, cell) {
                    Ok(next) => self.send(me, HOME[next], Msg::Req { id, cell: next, to: me }),
                    Err(_) => {
                        self.ran.push(id);
                        self.relayed_back(me, id);
                    }
                }
            }
            Cell::Freed => panic!("request {id} reached record {cell} on thread {me} after the sweep freed it"),
        }
    }

    /// The result of a request `me` relayed came back: `send_back`.
    fn relayed_back(&mut self, me: usize, id: u32) {
        let i = self.relays.iter().position(|r| r.thread == me && r.id == id).expect("a relay");
        let Relay { rec, to, .. } = self.relays.remove(i);
        let hint = match self.cells[rec] {
            Cell::Forward(at) => Some(Hint { from: rec, at, create: rec == O }),
            Cell::Freed => panic!("the result of {id} came back to record {rec} after the sweep freed it"),
            Cell::Here => None,
        };
        self.send(me, to, Msg::Done { id, hint });
    }

    fn free(&mut self, cell: usize) {
        assert!(!self.relays.iter().any(|r| r.rec == cell), "the sweep frees record {cell} while it relays");
        self.cells[cell] = Cell::Freed;
    }

    /// One message from the lanes into `me`, if any; true if one ran.
    fn step(&mut self, me: usize) -> bool {
        let Some(from) = (0..THREADS).find(|&f| !self.lanes[f][me].is_empty()) else { return false };
        let m = self.lanes[from][me].pop_front().unwrap();
        match m {
            Msg::Req { id, cell, to } => self.serve(me, id, cell, to),
            Msg::Done { id, hint } => {
                // `relayed_result`: the hint first, then the result to
                // whoever waits for it here.
                self.note(me, hint);
                if self.relays.iter().any(|r| r.thread == me && r.id == id) {
                    self.relayed_back(me, id);
                } else {
                    self.client_done(me, id);
                }
            }
            Msg::Retire => match self.entries[me].as_mut() {
                Some(e) if e.outstanding != 0 || !e.held.is_empty() => e.retiring = true,
                _ => {
                    self.entries[me] = None;
                    self.send(me, ORIGIN, Msg::Retired);
                }
            },
            Msg::Retired => {
                assert_eq!(me, ORIGIN);
                for rec in [R1, R2, R3] {
                    if HOME[rec] == ORIGIN {
                        self.free(rec);
                    } else {
                        self.send(ORIGIN, HOME[rec], Msg::Free { cell: rec });
                    }
                }
                self.swept = true;
            }
            Msg::Free { cell } => self.free(cell),
        }
        true
    }
}

fn world() -> Arc<Mutex<World>> {
    let mut cells = [Cell::Here; CELLS];
    cells[O] = Cell::Forward(H);
    cells[R1] = Cell::Forward(R2);
    cells[R2] = Cell::Forward(R3);
    cells[R3] = Cell::Forward(H);
    let route = |via| Entry { via, next: None, outstanding: 0, settled: true, held: VecDeque::new(), retiring: false };
    Arc::new(Mutex::new(World {
        lanes: Default::default(),
        cells,
        entries: [None, None, Some(route(None)), Some(route(Some(R1)))],
        counted: Default::default(),
        relays: Vec::new(),
        ran: Vec::new(),
        completed: 0,
        swept: false,
    }))
}

/// Passes each thread makes over its lanes beside the others; whatever is
/// left is served after they joined.
const PASSES: usize = 2;

fn serve(w: &Mutex<World>, me: usize) {
    for _ in 0..PASSES {
        let mut g = w.lock().unwrap();
        while g.step(me) {}
    }
}

/// A client thread: issues its requests, serving its lanes in between.
fn client(w: &Mutex<World>, me: usize, first: u32) {
    for id in first..first + OPS {
        let mut g = w.lock().unwrap();
        g.client_issue(me, id);
        while g.step(me) {}
    }
    serve(w, me);
}

#[test]
fn loom_records_relaying_to_records_while_a_sweep_frees_them() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.max_branches = 100_000;
    b.check(|| {
        let w = world();
        let mut hs = Vec::new();
        {
            // The origin: starts the sweep at some point among its steps.
            let w = w.clone();
            hs.push(thread::spawn(move || {
                serve(&w, ORIGIN);
                {
                    let mut g = w.lock().unwrap();
                    g.send(ORIGIN, C, Msg::Retire);
                }
                serve(&w, ORIGIN);
            }));
        }
        {
            let w = w.clone();
            hs.push(thread::spawn(move || serve(&w, A)));
        }
        {
            let w = w.clone();
            hs.push(thread::spawn(move || client(&w, B, 200)));
        }
        client(&w, C, 100);
        for h in hs {
            h.join().unwrap();
        }
        let mut g = w.lock().unwrap();
        while (0..THREADS).any(|me| g.step(me)) {}
        assert!(g.swept, "the sweep ended");
        // One more request of B, by whatever route B keeps now (every hint
        // it was given has arrived).
        g.client_issue(B, 300);
        while (0..THREADS).any(|me| g.step(me)) {}
        assert_eq!(g.completed, 2 * OPS + 1, "every request completed");
        let mut ran = g.ran.clone();
        ran.sort_unstable();
        assert_eq!(ran, vec![100, 101, 200, 201, 300], "each request ran once");
    });
}
