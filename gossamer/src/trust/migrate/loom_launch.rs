//! A `loom` model of launches on a moved property (`launch`): the origin,
//! two holders and FIFO lanes between them, as in `loom_model`. The value
//! is on the first holder. The origin starts launches (counting each as
//! out, holding them while it drains) and, among them, asks for a move to
//! the second holder, refused while a launch is out; a holder marks its
//! cell lent when a start arrives, runs the launched fiber later, then
//! tells the origin it ended; a hand-over that met a lent cell would be
//! refused there. Loom checks every interleaving (up to a preemption
//! bound) that each launch runs once, on the value, in start order; that
//! no hand-over ever meets a lent cell (so a move never fails silently);
//! and that a move that was not refused took place.
//!
//! A launch's result goes to its caller: on the holder's thread directly,
//! after the end is sent to the origin; elsewhere by way of the origin,
//! which counts the end first (`launch::answer`). A last model has the
//! caller on a thread of its own, asking for a move (on its own road to
//! the origin) as soon as its launch returned: that move is never
//! refused.

use std::collections::VecDeque;

use loom::sync::{Arc, Mutex};
use loom::thread;

use super::loom_model::model;

const ORIGIN: usize = 0;
const FIRST: usize = 1;
const SECOND: usize = 2;
/// A thread that only calls: launches are started for it, and it asks
/// for a move once its launch returned.
const CALLER: usize = 3;
const THREADS: usize = 4;

#[derive(Clone, Copy, Debug)]
enum Msg {
    /// Start launch `seq` where the value is.
    Start(u32),
    /// A launch ended (to the origin); its caller, on the holder, has its
    /// result already.
    Ended,
    /// Launch `seq` ended (to the origin), which passes its result on.
    EndedAnswer(u32),
    /// The result of launch `seq` (to its caller).
    Answer(u32),
    /// A caller asks the origin to move the value to thread `.0`.
    Move(usize),
    /// Move the value on to thread `.0`.
    HandOver(usize),
    /// The hand-over's answer: done or refused (to the origin).
    HandedOver(bool),
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Cell {
    None,
    Here,
    Forward(usize),
}

struct World {
    lanes: [[VecDeque<Msg>; THREADS]; THREADS],
    cells: [Cell; THREADS],
    /// Per thread: launched fibers holding or awaiting the latch there.
    lent: [u32; THREADS],
    /// Per thread: started fibers not yet run, in start order.
    fibers: [VecDeque<u32>; THREADS],
    /// The launches, in the order they ran.
    log: Vec<u32>,
    /// Per launch: its caller's thread, and whether it has its result.
    callers: Vec<usize>,
    answered: Vec<bool>,
    /// On the origin: launches out, draining, starts held meanwhile.
    out: u32,
    draining: bool,
    held: VecDeque<u32>,
    /// Move outcomes: refused at the origin, done.
    refused: bool,
    moved: bool,
}

impl World {
    fn send(&mut self, from: usize, to: usize, m: Msg) {
        self.lanes[from][to].push_back(m);
    }

    fn forward(&self) -> usize {
        match self.cells[ORIGIN] {
            Cell::Forward(t) => t,
            c => unreachable!("origin is {c:?}"),
        }
    }

    /// The origin starts launch `seq` (`launch::start_moved`).
    fn start(&mut self, seq: u32) {
        if self.draining {
            return self.held.push_back(seq);
        }
        self.out += 1;
        let t = self.forward();
        self.send(ORIGIN, t, Msg::Start(seq));
    }

    /// The origin is asked to move the value to `to` (`start_move`).
    fn ask_move(&mut self, to: usize) {
        if self.out != 0 {
            self.refused = true;
            return;
        }
        self.draining = true;
        let t = self.forward();
        self.send(ORIGIN, t, Msg::HandOver(to));
    }

    /// One message, or one launched fiber, on thread `me`. Lanes are
    /// served from the highest-numbered: the order between lanes is
    /// arbitrary in the runtime, and this one puts the caller's road ahead
    /// of the holders', the order in which a move could overtake the end
    /// of the launch its caller saw return.
    fn step(&mut self, me: usize) -> bool {
        if let Some(from) = (0..THREADS).rev().find(|&f| !self.lanes[f][me].is_empty()) {
            let m = self.lanes[from][me].pop_front().unwrap();
            match (me, m) {
                (ORIGIN, Msg::Ended) => self.out -= 1,
                (ORIGIN, Msg::EndedAnswer(seq)) => {
                    self.out -= 1;
                    match self.callers[seq as usize] {
                        ORIGIN => self.answered[seq as usize] = true,
                        c => self.send(ORIGIN, c, Msg::Answer(seq)),
                    }
                }
                (ORIGIN, Msg::Move(to)) => self.ask_move(to),
                (_, Msg::Answer(seq)) => self.answered[seq as usize] = true,
                (ORIGIN, Msg::HandedOver(done)) => {
                    assert!(done, "a hand-over met a lent cell: the move failed without the caller hearing of it");
                    self.cells[ORIGIN] = Cell::Forward(SECOND);
                    self.moved = true;
                    self.draining = false;
                    while let Some(seq) = self.held.pop_front() {
                        self.start(seq);
                    }
                }
                (_, Msg::Start(seq)) => match self.cells[me] {
                    Cell::Here => {
                        self.lent[me] += 1;
                        self.fibers[me].push_back(seq);
                    }
                    Cell::Forward(t) => self.send(me, t, Msg::Start(seq)),
                    Cell::None => panic!("launch {seq} reached thread {me}, which never held the value"),
                },
                (_, Msg::HandOver(to)) => {
                    let done = self.lent[me] == 0;
                    if done {
                        self.cells[me] = Cell::Forward(to);
                        self.cells[to] = Cell::Here;
                    }
                    self.send(me, ORIGIN, Msg::HandedOver(done));
                }
                (me, m) => unreachable!("thread {me} got {m:?}"),
            }
            return true;
        }
        let Some(seq) = self.fibers[me].pop_front() else { return false };
        assert_eq!(self.cells[me], Cell::Here, "launch {seq} ran where the value no longer is");
        self.log.push(seq);
        self.lent[me] -= 1;
        if self.callers[seq as usize] == me {
            self.send(me, ORIGIN, Msg::Ended);
            self.answered[seq as usize] = true;
        } else {
            self.send(me, ORIGIN, Msg::EndedAnswer(seq));
        }
        true
    }
}

fn serve(w: &Mutex<World>, me: usize) {
    for _ in 0..4 {
        let mut g = w.lock().unwrap();
        if !g.step(me) {
            drop(g);
            thread::yield_now();
        }
    }
}

/// The value on the first holder; `launches` launches, all for `caller`.
fn world(launches: u32, caller: usize) -> Arc<Mutex<World>> {
    Arc::new(Mutex::new(World {
        lanes: Default::default(),
        cells: [Cell::Forward(FIRST), Cell::Here, Cell::None, Cell::None],
        lent: [0; THREADS],
        fibers: Default::default(),
        log: Vec::new(),
        callers: vec![caller; launches as usize],
        answered: vec![false; launches as usize],
        out: 0,
        draining: false,
        held: VecDeque::new(),
        refused: false,
        moved: false,
    }))
}

/// Launches 0..`before` start before the move is asked for, the others
/// after it; the origin and the first holder call, in turn.
fn run(before: u32, launches: u32) {
    let w = world(launches, ORIGIN);
    for seq in (1..launches).step_by(2) {
        w.lock().unwrap().callers[seq as usize] = FIRST;
    }
    let hs: Vec<_> = [FIRST, SECOND]
        .into_iter()
        .map(|me| {
            let w = w.clone();
            thread::spawn(move || serve(&w, me))
        })
        .collect();
    // The origin: its script, serving its lanes between the steps.
    for seq in 0..launches {
        if seq == before {
            w.lock().unwrap().ask_move(SECOND);
        }
        let mut g = w.lock().unwrap();
        g.start(seq);
        g.step(ORIGIN);
    }
    if before == launches {
        w.lock().unwrap().ask_move(SECOND);
    }
    for h in hs {
        h.join().unwrap();
    }
    let mut g = w.lock().unwrap();
    while (0..THREADS).any(|me| g.step(me)) {}
    assert_eq!(g.log, (0..launches).collect::<Vec<_>>(), "each launch once, in start order");
    assert_eq!(g.out, 0);
    assert!(g.answered.iter().all(|&a| a), "every launch answered");
    assert!(g.moved != g.refused, "the move either took place or was refused");
}

/// One launch for the caller thread, which asks the origin for a move as
/// soon as it has the result: the move must take place.
fn run_caller() {
    let w = world(1, CALLER);
    let holder = {
        let w = w.clone();
        thread::spawn(move || serve(&w, FIRST))
    };
    let caller = {
        let w = w.clone();
        thread::spawn(move || {
            for _ in 0..4 {
                let mut g = w.lock().unwrap();
                g.step(CALLER);
                if g.answered[0] {
                    g.send(CALLER, ORIGIN, Msg::Move(SECOND));
                    return true;
                }
                drop(g);
                thread::yield_now();
            }
            false
        })
    };
    {
        let mut g = w.lock().unwrap();
        g.start(0);
        g.step(ORIGIN);
    }
    for _ in 0..2 {
        w.lock().unwrap().step(ORIGIN);
        thread::yield_now();
    }
    holder.join().unwrap();
    let asked = caller.join().unwrap();
    let mut g = w.lock().unwrap();
    while (0..THREADS).any(|me| g.step(me)) {}
    if !asked {
        // The caller had no time to ask within its steps: it asks now.
        assert!(g.answered[0]);
        g.send(CALLER, ORIGIN, Msg::Move(SECOND));
        while (0..THREADS).any(|me| g.step(me)) {}
    }
    assert_eq!(g.log, [0]);
    assert!(!g.refused, "a move asked for after the launch returned was refused as if the launch were out");
    assert!(g.moved);
}

#[test]
fn loom_launch_a_move_asked_for_while_a_launch_is_out_is_refused() {
    model(|| run(1, 2));
}

#[test]
fn loom_launch_starts_held_while_the_value_is_handed_over_run_after_it() {
    model(|| run(0, 2));
}

#[test]
fn loom_launch_a_move_after_the_launches_ended_or_not() {
    model(|| run(2, 2));
}

#[test]
fn loom_launch_a_caller_elsewhere_moves_it_right_after_its_launch_returned() {
    model(run_caller);
}
