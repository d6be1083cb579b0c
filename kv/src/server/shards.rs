//! A connection worker's handles to the shards and the processes' agents,
//! and the one place where requests are delegated: `apply_with_then`, so
//! the worker goes on parsing while the trustee runs the request, and the
//! reply lands in the connection's ordered queue when the callback runs.
//!
//! The delegated closures capture nothing: the request and the worker's
//! thread id travel as the argument, so the same call reaches a shard on
//! this thread, on another thread of this process, or in another process.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use super::agent::{Agent, AgentOp, AgentReply};
use super::local::ConnShared;
use super::outq::{Ctx, Reply};
use super::placement::Placement;
use super::wake;
use crate::store::{shard_of, Op, Outcome, Shard};

/// Which processes a broadcast reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole program.
    All,
    /// The process of this rank only.
    Rank(usize),
}

/// What a broadcast gathered: the shards' outcomes and the processes'
/// replies, in no particular order.
#[derive(Debug, Default)]
pub struct Gathered {
    /// One outcome per shard reached.
    pub shards: Vec<Outcome>,
    /// One reply per process reached.
    pub processes: Vec<AgentReply>,
}

/// Runs a request on a shard: the closure that crosses to its trustee.
fn run_on_shard(s: &mut Shard, (op, origin): (Op, usize)) -> Outcome {
    wake::note_served(origin);
    // A panic here would skip `then` and stall the connection: catch it
    // on the trustee and answer with an error instead.
    catch_unwind(AssertUnwindSafe(|| s.run(op))).unwrap_or(Outcome::Failed)
}

/// The shards as seen from one connection worker.
pub struct Shards {
    placement: Placement,
    origin: usize,
    local_first: bool,
}

impl Shards {
    /// The shards and agents of `placement`, as seen from the connection
    /// worker on global thread `origin`. With `local_first`, requests for
    /// a shard on `origin` itself are served at once, in the worker.
    pub fn new(placement: Placement, origin: usize, local_first: bool) -> Shards {
        Shards { placement, origin, local_first }
    }

    /// The shard owning `key`.
    pub fn of(&self, key: &[u8]) -> usize {
        shard_of(key, self.placement.shards.len())
    }

    /// Processes in the program.
    pub fn processes(&self) -> usize {
        self.placement.agents.len()
    }

    /// Delegates `op` to `shard`; `then` gets the outcome on this thread.
    pub fn issue_then<G>(&self, conn: &Rc<ConnShared>, shard: usize, op: Op, then: G)
    where
        G: FnOnce(&ConnShared, Outcome) + 'static,
    {
        let w = self.placement.shard_threads[shard];
        let trust = &self.placement.shards[shard];
        if self.local_first && w == self.origin {
            // The shard is this thread's own: the trust's local shortcut
            // runs the request here and now, with no bookkeeping.
            let outcome = trust.apply_with(run_on_shard, (op, self.origin));
            then(conn, outcome);
            return;
        }
        conn.local.begin(w);
        conn.pending.set(conn.pending.get() + 1);
        let c = conn.clone();
        trust.apply_with_then(run_on_shard, (op, self.origin), move |outcome| {
            c.local.end(w);
            c.pending.set(c.pending.get() - 1);
            then(&c, outcome);
        });
    }

    /// Delegates `op` to the agent of process `rank`.
    fn agent_then<G>(&self, conn: &Rc<ConnShared>, rank: usize, op: AgentOp, then: G)
    where
        G: FnOnce(&ConnShared, AgentReply) + 'static,
    {
        let w = self.placement.agent_threads[rank];
        conn.local.begin(w);
        conn.pending.set(conn.pending.get() + 1);
        let c = conn.clone();
        self.placement.agents[rank].apply_with_then(
            |a: &mut Agent, (op, origin): (AgentOp, usize)| a.run(op, origin),
            (op, self.origin),
            move |reply| {
                c.local.end(w);
                c.pending.set(c.pending.get() - 1);
                then(&c, reply);
            },
        );
    }

    /// Delegates `op` on `key` to its shard and answers in order with `ctx`.
    pub fn issue(&self, conn: &Rc<ConnShared>, key_shard: usize, op: Op, ctx: Ctx) {
        let seq = conn.out.borrow_mut().reserve();
        self.issue_then(conn, key_shard, op, move |c, outcome| c.complete(seq, Reply::Outcome(outcome, ctx)));
    }

    /// Sends `shard_op` to every shard and `agent_op` to every process in
    /// `scope`; `finish` turns what comes back into one reply, in order.
    pub fn broadcast<F>(
        &self,
        conn: &Rc<ConnShared>,
        scope: Scope,
        shard_op: Option<Op>,
        agent_op: Option<AgentOp>,
        finish: F,
    ) where
        F: FnOnce(Gathered) -> Reply + 'static,
    {
        let p = &self.placement;
        let in_scope = |rank: usize| scope == Scope::All || scope == Scope::Rank(rank);
        let shards: Vec<usize> = match shard_op {
            Some(_) => (0..p.shards.len()).filter(|&s| in_scope(p.shard_ranks[s])).collect(),
            None => Vec::new(),
        };
        let ranks: Vec<usize> = match agent_op {
            Some(_) => (0..p.agents.len()).filter(|&r| in_scope(r)).collect(),
            None => Vec::new(),
        };
        let seq = conn.out.borrow_mut().reserve();
        let n = shards.len() + ranks.len();
        if n == 0 {
            conn.complete(seq, finish(Gathered::default()));
            return;
        }
        let gather = Rc::new(RefCell::new((Gathered::default(), Some(finish))));
        let done = move |c: &ConnShared, g: &RefCell<(Gathered, Option<F>)>| {
            let mut st = g.borrow_mut();
            if st.0.shards.len() + st.0.processes.len() == n {
                let all = std::mem::take(&mut st.0);
                let f = st.1.take().expect("broadcast finished twice");
                drop(st);
                c.complete(seq, f(all));
            }
        };
        for s in shards {
            let g = gather.clone();
            let op = shard_op.clone().expect("shards are reached only with an op");
            self.issue_then(conn, s, op, move |c, outcome| {
                g.borrow_mut().0.shards.push(outcome);
                done(c, &g);
            });
        }
        for r in ranks {
            let g = gather.clone();
            let op = agent_op.expect("agents are reached only with an op");
            self.agent_then(conn, r, op, move |c, reply| {
                g.borrow_mut().0.processes.push(reply);
                done(c, &g);
            });
        }
    }
}
