//! A `loom` model of a launch from a thread that keeps a route
//! (`direct::after_routed`): the client sends its requests straight to the
//! holder, while the start of a launch goes to the origin, which routes it
//! on to the holder. The holder lends the value to a launch from its start
//! until the launched fiber has run, and refuses a request that arrives
//! meanwhile. The client's script is a request, a launch whose result it
//! waits for, and another request. Loom checks every interleaving (up to
//! a preemption bound) that nothing is refused and everything runs once,
//! in the script's order.
//!
//! With the start sent at once (what the client did before the detour),
//! it can reach the holder ahead of the first request, which is then
//! refused: the last test checks that the model finds it.

use std::collections::VecDeque;

use loom::sync::{Arc, Mutex};
use loom::thread;

use super::loom_model::model;

const ORIGIN: usize = 0;
const HOLDER: usize = 1;
const CLIENT: usize = 2;
const THREADS: usize = 3;

#[derive(Clone, Copy, Debug)]
enum Msg {
    /// A request by the route (client to holder).
    Request(u32),
    /// A launch's start: to the origin, then routed on to the holder.
    Start(u32),
    /// The result of `seq` (to the client).
    Answer(u32),
}

/// What waits in the client's route entry (`direct::Waiting`).
#[derive(Clone, Copy, Debug)]
enum Held {
    Routed(u32),
    Detour(u32),
}

struct World {
    lanes: [[VecDeque<Msg>; THREADS]; THREADS],
    /// On the holder: launched fibers not yet run, and whether the value
    /// is lent to one.
    fibers: VecDeque<u32>,
    lent: u32,
    /// What ran on the value, in order.
    log: Vec<u32>,
    /// On the client: the route entry's count and held queue, the results
    /// it has, and where its script is.
    outstanding: u32,
    held: VecDeque<Held>,
    answered: Vec<bool>,
    next: u32,
    /// Detours go through the entry (false: sent at once).
    detour: bool,
}

/// The client's script: a request, a launch it waits for, a request.
const SCRIPT: [(u32, bool); 3] = [(0, false), (1, true), (2, false)];

impl World {
    fn send(&mut self, from: usize, to: usize, m: Msg) {
        self.lanes[from][to].push_back(m);
    }

    /// The client sends what it issued or held (`direct::go`).
    fn go(&mut self, h: Held) {
        match h {
            Held::Routed(seq) => {
                self.outstanding += 1;
                self.send(CLIENT, HOLDER, Msg::Request(seq));
            }
            Held::Detour(seq) => self.send(CLIENT, ORIGIN, Msg::Start(seq)),
        }
    }

    /// The client issues `h` (`direct::issue`, `direct::after_routed`).
    fn issue(&mut self, h: Held) {
        let wait = match h {
            Held::Routed(_) => !self.held.is_empty(),
            Held::Detour(_) => self.detour && (self.outstanding != 0 || !self.held.is_empty()),
        };
        if wait {
            self.held.push_back(h);
        } else {
            self.go(h);
        }
    }

    /// A routed request completed on the client (`direct::done`).
    fn done(&mut self) {
        self.outstanding -= 1;
        while let Some(&h) = self.held.front() {
            if matches!(h, Held::Detour(_)) && self.outstanding != 0 {
                break;
            }
            self.held.pop_front();
            self.go(h);
        }
    }

    /// The client's next step of its script, if it may take it: a launch
    /// is waited for before the next step.
    fn script(&mut self) {
        let Some(&(seq, launch)) = SCRIPT.get(self.next as usize) else { return };
        if seq > 0 && SCRIPT[seq as usize - 1].1 && !self.answered[seq as usize - 1] {
            return;
        }
        self.next += 1;
        self.issue(if launch { Held::Detour(seq) } else { Held::Routed(seq) });
    }

    /// One message, or the launched fiber, on thread `me`.
    fn step(&mut self, me: usize) -> bool {
        if let Some(from) = (0..THREADS).find(|&f| !self.lanes[f][me].is_empty()) {
            let m = self.lanes[from][me].pop_front().unwrap();
            match (me, m) {
                (ORIGIN, Msg::Start(seq)) => self.send(ORIGIN, HOLDER, Msg::Start(seq)),
                (HOLDER, Msg::Start(seq)) => {
                    self.lent += 1;
                    self.fibers.push_back(seq);
                }
                (HOLDER, Msg::Request(seq)) => {
                    assert_eq!(self.lent, 0, "request {seq} reached the value while a launch held it: refused");
                    self.log.push(seq);
                    self.send(HOLDER, CLIENT, Msg::Answer(seq));
                }
                (CLIENT, Msg::Answer(seq)) => {
                    self.answered[seq as usize] = true;
                    if !SCRIPT[seq as usize].1 {
                        self.done();
                    }
                }
                (me, m) => unreachable!("thread {me} got {m:?}"),
            }
            return true;
        }
        if me != HOLDER {
            return false;
        }
        let Some(seq) = self.fibers.pop_front() else { return false };
        self.log.push(seq);
        self.lent -= 1;
        // The result goes back to the caller (by way of the origin in the
        // runtime, which changes nothing here).
        self.send(HOLDER, CLIENT, Msg::Answer(seq));
        true
    }
}

fn serve(w: &Mutex<World>, me: usize) {
    for _ in 0..4 {
        let mut g = w.lock().unwrap();
        if me == CLIENT {
            g.script();
        }
        if !g.step(me) {
            drop(g);
            thread::yield_now();
        }
    }
}

fn run(detour: bool) {
    let w = Arc::new(Mutex::new(World {
        lanes: Default::default(),
        fibers: VecDeque::new(),
        lent: 0,
        log: Vec::new(),
        outstanding: 0,
        held: VecDeque::new(),
        answered: vec![false; SCRIPT.len()],
        next: 0,
        detour,
    }));
    let hs: Vec<_> = [ORIGIN, HOLDER]
        .into_iter()
        .map(|me| {
            let w = w.clone();
            thread::spawn(move || serve(&w, me))
        })
        .collect();
    serve(&w, CLIENT);
    for h in hs {
        h.join().unwrap();
    }
    let mut g = w.lock().unwrap();
    // Bounded: the asserts below catch a script that could not finish.
    for _ in 0..64 {
        g.script();
        if !(0..THREADS).any(|me| g.step(me)) && g.next as usize == SCRIPT.len() {
            break;
        }
    }
    assert_eq!(g.log, [0, 1, 2], "everything ran once, in the script's order");
    assert!(g.answered.iter().all(|&a| a));
    assert!(g.held.is_empty() && g.outstanding == 0);
}

#[test]
fn loom_detour_a_launch_runs_after_the_requests_its_thread_sent_by_the_route() {
    model(|| run(true));
}

#[test]
#[should_panic(expected = "refused")]
fn loom_detour_without_it_a_launch_can_overtake_them() {
    model(|| run(false));
}
