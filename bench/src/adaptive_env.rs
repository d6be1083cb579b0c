//! Adaptive trusts (`gossamer::Adaptive<T>`) for the benchmarks: spreading
//! them over a runtime's trustees and reading every one back for
//! verification.

use gossamer::{Adaptive, Policy};

use crate::error::{BenchError, Result};
use crate::trust_env::TrustEnv;

/// Entrusts `count` adaptive objects, object `i` to trustee `i mod T`,
/// each created on its own trustee, all trustees in parallel, each under
/// `policy`.
pub fn entrust_spread<T, M>(env: &TrustEnv, count: usize, policy: Policy, make: M) -> Result<Vec<Adaptive<T>>>
where
    T: Send + 'static,
    M: Fn(usize) -> T + Clone + Send + 'static,
{
    let tn = env.trustees.len();
    let handles: Vec<_> = env
        .trustees
        .iter()
        .enumerate()
        .map(|(p, &w)| {
            let make = make.clone();
            env.rt.spawn_on(w, move || {
                let me = gossamer::local_trustee();
                (p..count)
                    .step_by(tn)
                    .map(|i| {
                        let a = me.entrust_adaptive(make(i));
                        if policy != Policy::Adaptive {
                            a.set_policy(policy);
                        }
                        a
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut parts = Vec::with_capacity(tn);
    for h in handles {
        parts.push(h.join().map_err(|e| BenchError::Other(format!("entrust fiber failed: {e}")))?.into_iter());
    }
    Ok((0..count).map(|i| parts[i % tn].next().expect("one object per index")).collect())
}

/// Folds `f` over every object once the clients are done: each is fixed
/// in lock mode and read in place by one fiber.
pub fn fold<T, A, F>(env: &TrustEnv, objs: &std::sync::Arc<Vec<Adaptive<T>>>, init: A, f: F) -> Result<A>
where
    T: Send + 'static,
    A: Copy + gossamer::Transferable,
    F: Fn(A, &mut T) -> A + Copy + Send + 'static,
{
    let objs = objs.clone();
    env.rt
        .spawn_on(env.clients[0], move || {
            let mut acc = init;
            for o in objs.iter() {
                o.set_policy(Policy::Lock);
                acc = o.apply(move |v| f(acc, v));
            }
            acc
        })
        .join()
        .map_err(|e| BenchError::Other(format!("verification fiber failed: {e}")))
}
