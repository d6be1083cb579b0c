//! A runtime set up for one Trust<T> variant: which workers run client
//! fibers and which serve as trustees, spreading objects over the trustees,
//! starting client fibers, and reading every object back on its own
//! trustee for verification.

use std::sync::Arc;

use gossamer::{JoinHandle, Runtime, Trust};

use crate::error::{BenchError, Result};

/// Where the trustees run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Every worker is a client and a trustee.
    Shared,
    /// The last `n` workers only serve; the others only issue requests.
    Dedicated(usize),
    /// Every worker starts as a client and a trustee, as in `Shared`; the
    /// runtime's controller dedicates trustees while the run goes on.
    Auto,
}

/// A started runtime and its division of labour.
pub struct TrustEnv {
    pub rt: Runtime,
    /// Workers that run client fibers.
    pub clients: Vec<usize>,
    /// Workers that own the benchmark's objects.
    pub trustees: Vec<usize>,
    /// Whether the controller picks the dedicated count (its choices are
    /// printed when the environment is dropped).
    auto: bool,
}

impl TrustEnv {
    pub fn start(threads: usize, placement: Placement, pin: bool) -> Result<TrustEnv> {
        let dedicated = match placement {
            Placement::Shared | Placement::Auto => 0,
            Placement::Dedicated(n) => n,
        };
        let auto = placement == Placement::Auto;
        let mut b = Runtime::builder().workers(threads).dedicated_trustees(dedicated).pin_threads(pin);
        if auto {
            b = b.dedicated_trustees_auto();
        }
        let rt = b.build()?;
        let clients: Vec<usize> = (0..threads - dedicated).collect();
        let trustees: Vec<usize> =
            if dedicated > 0 { (threads - dedicated..threads).collect() } else { clients.clone() };
        Ok(TrustEnv { rt, clients, trustees, auto })
    }

    /// Entrusts `count` objects, object `i` to trustee `i mod T`; each is
    /// created on its own trustee, all trustees in parallel.
    pub fn entrust_spread<T, M>(&self, count: usize, make: M) -> Result<Vec<Trust<T>>>
    where
        T: Send + 'static,
        M: Fn(usize) -> T + Clone + Send + 'static,
    {
        let tn = self.trustees.len();
        let handles: Vec<_> = self
            .trustees
            .iter()
            .enumerate()
            .map(|(p, &w)| {
                let make = make.clone();
                self.rt.spawn_on(w, move || {
                    let me = gossamer::local_trustee();
                    (p..count).step_by(tn).map(|i| me.entrust(make(i))).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut parts = Vec::with_capacity(tn);
        for h in handles {
            parts.push(h.join().map_err(|e| BenchError::Other(format!("entrust fiber failed: {e}")))?.into_iter());
        }
        Ok((0..count).map(|i| parts[i % tn].next().expect("one object per index")).collect())
    }

    /// Starts `per_worker` fibers on every client worker; `make(client,
    /// fiber)` builds each fiber's body (`client` counts client workers
    /// from 0).
    pub fn spawn_clients<R, F>(&self, per_worker: usize, mut make: impl FnMut(usize, usize) -> F) -> Vec<JoinHandle<R>>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let mut hs = Vec::with_capacity(self.clients.len() * per_worker);
        for (c, &w) in self.clients.iter().enumerate() {
            for f in 0..per_worker {
                hs.push(self.rt.spawn_on(w, make(c, f)));
            }
        }
        hs
    }

    /// Folds `f` over every object, each read directly on its own trustee
    /// (the local shortcut); returns one accumulator per trustee.
    pub fn fold_local<T, A, F>(&self, objs: &Arc<Vec<Trust<T>>>, init: A, f: F) -> Result<Vec<A>>
    where
        T: Send + 'static,
        A: Copy + gossamer::Transferable,
        F: Fn(A, &mut T) -> A + Copy + Send + 'static,
    {
        let handles: Vec<_> = self
            .trustees
            .iter()
            .map(|&w| {
                let objs = objs.clone();
                self.rt.spawn_on(w, move || {
                    let mut acc = init;
                    for o in objs.iter().filter(|o| o.trustee().index() == w) {
                        acc = o.apply(move |v| f(acc, v));
                    }
                    acc
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|e| BenchError::Other(format!("verification fiber failed: {e}"))))
            .collect()
    }
}

impl Drop for TrustEnv {
    fn drop(&mut self) {
        if self.auto {
            let changes: Vec<String> = self
                .rt
                .dedicated_history()
                .iter()
                .map(|c| format!("{}->{} at {:.0}ms", c.from, c.to, c.at.as_secs_f64() * 1e3))
                .collect();
            eprintln!("dedicated auto: k={} at the end; changes: [{}]", self.rt.dedicated(), changes.join(", "));
        }
    }
}

/// Joins client fibers, failing on a panic.
pub fn join_all<R>(handles: Vec<JoinHandle<R>>) -> Result<Vec<R>> {
    handles.into_iter().map(|h| h.join().map_err(|e| BenchError::Other(format!("client fiber failed: {e}")))).collect()
}
