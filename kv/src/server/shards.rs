//! A connection worker's handles to the shards, and the one place where
//! requests are delegated: `apply_with_then`, so the worker goes on parsing
//! while the trustee runs the request, and the reply lands in the
//! connection's ordered queue when the callback runs.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use gossamer::Trust;

use super::local::ConnShared;
use super::outq::{Ctx, Reply};
use super::wake;
use crate::store::{shard_of, Op, Outcome, Shard};

/// The shards as seen from one connection worker.
pub struct Shards {
    trusts: Vec<Trust<Shard>>,
    workers: Vec<usize>,
    origin: usize,
}

impl Shards {
    /// Shards `trusts`, where shard `i` lives on worker `workers[i]`, as
    /// seen from worker `origin`.
    pub fn new(trusts: Vec<Trust<Shard>>, workers: Vec<usize>, origin: usize) -> Shards {
        assert_eq!(trusts.len(), workers.len());
        Shards { trusts, workers, origin }
    }

    /// The shard owning `key`.
    pub fn of(&self, key: &[u8]) -> usize {
        shard_of(key, self.trusts.len())
    }

    /// Delegates `op` to `shard`; `then` gets the outcome on this thread.
    pub fn issue_then<G>(&self, conn: &Rc<ConnShared>, shard: usize, op: Op, then: G)
    where
        G: FnOnce(&ConnShared, Outcome) + 'static,
    {
        let w = self.workers[shard];
        conn.local.begin(w);
        conn.pending.set(conn.pending.get() + 1);
        let c = conn.clone();
        let origin = self.origin;
        self.trusts[shard].apply_with_then(
            move |s: &mut Shard, op: Op| {
                wake::note_served(origin);
                // A panic here would skip `then` and stall the connection,
                // and the runtime has no `try_` form of `apply_with_then`:
                // catch it on the trustee and answer with an error instead.
                catch_unwind(AssertUnwindSafe(|| s.run(op))).unwrap_or(Outcome::Failed)
            },
            op,
            move |outcome| {
                c.local.end(w);
                c.pending.set(c.pending.get() - 1);
                then(&c, outcome);
            },
        );
    }

    /// Delegates `op` on `key` to its shard and answers in order with `ctx`.
    pub fn issue(&self, conn: &Rc<ConnShared>, key_shard: usize, op: Op, ctx: Ctx) {
        let seq = conn.out.borrow_mut().reserve();
        self.issue_then(conn, key_shard, op, move |c, outcome| c.complete(seq, Reply::Outcome(outcome, ctx)));
    }

    /// Sends `op()` to every shard; `finish` turns all outcomes into one
    /// reply, in order.
    pub fn broadcast<F>(&self, conn: &Rc<ConnShared>, op: impl Fn() -> Op, finish: F)
    where
        F: FnOnce(Vec<Outcome>) -> Reply + 'static,
    {
        let seq = conn.out.borrow_mut().reserve();
        let n = self.trusts.len();
        let gather = Rc::new(RefCell::new((Vec::with_capacity(n), Some(finish))));
        for shard in 0..n {
            let g = gather.clone();
            self.issue_then(conn, shard, op(), move |c, outcome| {
                let mut st = g.borrow_mut();
                st.0.push(outcome);
                if st.0.len() == n {
                    let outs = std::mem::take(&mut st.0);
                    let f = st.1.take().expect("broadcast finished twice");
                    drop(st);
                    c.complete(seq, f(outs));
                }
            });
        }
    }
}
