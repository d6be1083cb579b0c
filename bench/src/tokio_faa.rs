//! Shared counters updated by tokio tasks: `Arc<std::sync::Mutex>`,
//! `Arc<tokio::sync::Mutex>`, and trusts through `apply_async`, side by
//! side in one run, against the number of counters.
//!
//! Tasks on tokio's multi-thread runtime repeatedly pick a counter
//! (uniformly, from a per-task generator) and increment it with one `pause`
//! inside the critical section (the faa benchmark's critical section), then
//! read it back:
//! * `std-mutex`: `counters[k].lock()` — a task never yields, so it keeps
//!   its tokio thread for the whole measurement (the lock's best case);
//! * `tokio-mutex`: `counters[k].lock().await`;
//! * `apply-async`: `counters[k].apply_async(..).await`, one request in
//!   flight per task, the counters spread over the gossamer runtime's
//!   trustees;
//! * `apply-async-window`: each task issues a window of requests, then
//!   awaits them in order, so `tasks × window` are in flight.
//!
//! The gossamer workers are threads of their own, beside tokio's: on a
//! small machine the trust variants share the cores between both runtimes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gossamer::Trust;

use crate::cli::TokioArgs;
use crate::error::{expect_eq, BenchError, Result};
use crate::faa::select;
use crate::locks::Padded;
use crate::progress;
use crate::report::sweep::{Series, Sweep};
use crate::settings::{Scale, Settings};
use crate::trust_env::{Placement, TrustEnv};
use crate::work::fetch_add;

/// One column of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    StdMutex,
    TokioMutex,
    ApplyAsync,
    ApplyAsyncWindow,
}

impl Variant {
    pub const ALL: [Variant; 4] =
        [Variant::StdMutex, Variant::TokioMutex, Variant::ApplyAsync, Variant::ApplyAsyncWindow];

    pub fn name(self) -> &'static str {
        match self {
            Variant::StdMutex => "std-mutex",
            Variant::TokioMutex => "tokio-mutex",
            Variant::ApplyAsync => "apply-async",
            Variant::ApplyAsyncWindow => "apply-async-window",
        }
    }

    fn trust(self) -> bool {
        matches!(self, Variant::ApplyAsync | Variant::ApplyAsyncWindow)
    }
}

/// Object counts swept by default.
fn default_objects(scale: Scale) -> Vec<u64> {
    match scale {
        Scale::Full => vec![1, 10, 100, 1000, 10_000, 100_000, 1_000_000],
        Scale::Quick => vec![1, 1000, 1_000_000],
        Scale::Smoke => vec![1, 1000],
    }
}

/// The resolved shape of a run.
struct Shape {
    tasks: usize,
    tokio_threads: usize,
    trustees: usize,
    window: usize,
}

/// Start and stop signals for tasks.
#[derive(Default)]
struct Signal {
    ready: AtomicUsize,
    go: AtomicBool,
    stop: AtomicBool,
}

impl Signal {
    async fn arrive(&self) {
        self.ready.fetch_add(1, Ordering::SeqCst);
        while !self.go.load(Ordering::Acquire) {
            tokio::task::yield_now().await;
        }
    }

    #[inline(always)]
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A per-task generator of counter indices (xorshift, mapped onto `0..k`
/// by multiplication).
struct Keys {
    state: u64,
    k: u64,
}

impl Keys {
    fn new(seed: u64, task: usize, k: usize) -> Keys {
        let state = (seed ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(task as u64 * 2 + 1) | 1;
        Keys { state, k: k as u64 }
    }

    #[inline(always)]
    fn next(&mut self) -> usize {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        ((x as u128 * self.k as u128) >> 64) as usize
    }
}

/// The counters of one object count, for every variant.
struct Objects {
    std: Arc<Vec<Padded<std::sync::Mutex<u64>>>>,
    tokio: Arc<Vec<Padded<tokio::sync::Mutex<u64>>>>,
    trusts: Arc<Vec<Trust<u64>>>,
    /// What the trust counters should add up to so far.
    trust_total: u64,
}

/// Sums the trust counters with `apply_async`, a bounded number in flight.
async fn sum_trusts(trusts: &[Trust<u64>]) -> u64 {
    let mut total = 0;
    for chunk in trusts.chunks(4096) {
        let fs: Vec<_> = chunk.iter().map(|t| t.apply_async(|v| *v)).collect();
        for f in fs {
            total += f.await;
        }
    }
    total
}

/// One measurement; returns Mops/s.
fn measure(
    s: &Settings,
    shape: &Shape,
    rt: &tokio::runtime::Runtime,
    objs: &mut Objects,
    v: Variant,
    k: usize,
    rep: usize,
) -> Result<f64> {
    let sig = Arc::new(Signal::default());
    let window = shape.window;
    let handles: Vec<tokio::task::JoinHandle<u64>> = (0..shape.tasks)
        .map(|task| {
            let sig = sig.clone();
            let mut keys = Keys::new(s.seed ^ (rep as u64).wrapping_mul(0xA24B_AED4_963E_E407), task, k);
            match v {
                Variant::StdMutex => {
                    let c = objs.std.clone();
                    rt.spawn(async move {
                        sig.arrive().await;
                        let (mut ops, mut sum) = (0u64, 0u64);
                        while !sig.stopped() {
                            let mut g = c[keys.next()].0.lock().unwrap_or_else(|e| e.into_inner());
                            sum = sum.wrapping_add(fetch_add(&mut g));
                            drop(g);
                            ops += 1;
                        }
                        std::hint::black_box(sum);
                        ops
                    })
                }
                Variant::TokioMutex => {
                    let c = objs.tokio.clone();
                    rt.spawn(async move {
                        sig.arrive().await;
                        let (mut ops, mut sum) = (0u64, 0u64);
                        while !sig.stopped() {
                            let mut g = c[keys.next()].0.lock().await;
                            sum = sum.wrapping_add(fetch_add(&mut g));
                            drop(g);
                            ops += 1;
                        }
                        std::hint::black_box(sum);
                        ops
                    })
                }
                Variant::ApplyAsync => {
                    let c = objs.trusts.clone();
                    rt.spawn(async move {
                        sig.arrive().await;
                        let (mut ops, mut sum) = (0u64, 0u64);
                        while !sig.stopped() {
                            sum = sum.wrapping_add(c[keys.next()].apply_async(fetch_add).await);
                            ops += 1;
                        }
                        std::hint::black_box(sum);
                        ops
                    })
                }
                Variant::ApplyAsyncWindow => {
                    let c = objs.trusts.clone();
                    rt.spawn(async move {
                        sig.arrive().await;
                        let (mut ops, mut sum) = (0u64, 0u64);
                        let mut inflight = Vec::with_capacity(window);
                        while !sig.stopped() {
                            inflight.extend((0..window).map(|_| c[keys.next()].apply_async(fetch_add)));
                            for f in inflight.drain(..) {
                                sum = sum.wrapping_add(f.await);
                            }
                            ops += window as u64;
                        }
                        std::hint::black_box(sum);
                        ops
                    })
                }
            }
        })
        .collect();
    while sig.ready.load(Ordering::SeqCst) < shape.tasks {
        std::thread::sleep(Duration::from_micros(100));
    }
    let start = Instant::now();
    sig.go.store(true, Ordering::Release);
    std::thread::sleep(s.duration);
    sig.stop.store(true, Ordering::Relaxed);
    let ops: u64 = rt.block_on(async {
        let mut ops = 0;
        for h in handles {
            ops += h.await.map_err(|e| BenchError::Other(format!("task failed: {e}")))?;
        }
        Ok::<_, BenchError>(ops)
    })?;
    let secs = start.elapsed().as_secs_f64();
    let counted: u64 = match v {
        Variant::StdMutex => {
            let c: u64 =
                objs.std.iter().map(|m| std::mem::take(&mut *m.0.lock().unwrap_or_else(|e| e.into_inner()))).sum();
            expect_eq("sum of std::sync::Mutex counters", c, ops + s.fault as u64)?;
            c
        }
        Variant::TokioMutex => {
            let c: u64 = objs.tokio.iter().map(|m| std::mem::take(&mut *m.0.blocking_lock())).sum();
            expect_eq("sum of tokio::sync::Mutex counters", c, ops + s.fault as u64)?;
            c
        }
        Variant::ApplyAsync | Variant::ApplyAsyncWindow => {
            objs.trust_total += ops;
            let c = rt.block_on(sum_trusts(&objs.trusts));
            expect_eq("sum of Trust counters", c, objs.trust_total + s.fault as u64)?;
            c
        }
    };
    std::hint::black_box(counted);
    Ok(ops as f64 / secs / 1e6)
}

pub fn run(s: &Settings, args: &TokioArgs) -> Result<()> {
    let objects = if args.objects.is_empty() { default_objects(s.scale) } else { args.objects.clone() };
    if objects.iter().any(|&k| k == 0 || k > 1 << 28) {
        return Err(BenchError::Other("object counts must be between 1 and 2^28".into()));
    }
    let variants = select(&Variant::ALL, Variant::name, &args.variants)?;
    let shape = Shape {
        tasks: args.tasks.unwrap_or(256).max(1),
        tokio_threads: args.tokio_threads.unwrap_or(s.threads).max(1),
        trustees: args.trustees.unwrap_or((s.threads / 2).max(1)).max(1),
        window: args.task_window.unwrap_or(16).max(1),
    };
    println!(
        "tokio: objects {objects:?}; {} tasks on {} tokio worker threads; {} gossamer trustee threads; window {} per \
         task in apply-async-window; variants {}",
        shape.tasks,
        shape.tokio_threads,
        shape.trustees,
        shape.window,
        variants.iter().map(|v| v.name()).collect::<Vec<_>>().join(",")
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(shape.tokio_threads)
        .thread_name("bench-tokio")
        .build()
        .map_err(|e| BenchError::Other(format!("tokio runtime: {e}")))?;
    let mut sweep = Sweep::new(
        "tokio",
        &format!(
            "Counters from tokio tasks: {} tasks, {} tokio threads, {} gossamer trustees",
            shape.tasks, shape.tokio_threads, shape.trustees
        ),
        "objects",
        true,
        "Mops/s",
        variants.iter().map(|v| Series { name: v.name().to_string(), trust: v.trust() }).collect(),
        objects.clone(),
    );
    let pb = progress::bar("tokio", (objects.len() * variants.len() * s.repeat) as u64);
    for (xi, &k) in objects.iter().enumerate() {
        let k = k as usize;
        let needs_trusts = variants.iter().any(|v| v.trust());
        let env = if needs_trusts { Some(TrustEnv::start(shape.trustees, Placement::Shared, s.pin)?) } else { None };
        let trusts = match &env {
            Some(env) => env.entrust_spread(k, |_| 0u64)?,
            None => Vec::new(),
        };
        let mut objs = Objects {
            std: Arc::new((0..k).map(|_| Padded(std::sync::Mutex::new(0))).collect()),
            tokio: Arc::new((0..k).map(|_| Padded(tokio::sync::Mutex::new(0))).collect()),
            trusts: Arc::new(trusts),
            trust_total: 0,
        };
        // Repetitions outside, variants inside: noise hits them alike.
        for rep in 0..s.repeat {
            for (vi, &v) in variants.iter().enumerate() {
                pb.set_message(format!("K={k} {} #{}", v.name(), rep + 1));
                let mops = measure(s, &shape, &rt, &mut objs, v, k, rep).map_err(|e| match e {
                    BenchError::Mismatch(m) => BenchError::Mismatch(format!("tokio K={k} {}: {m}", v.name())),
                    other => other,
                })?;
                sweep.add(xi, vi, mops);
                pb.inc(1);
            }
        }
        // Stop the runtime first: the properties go with their trustees,
        // without a message per trust.
        drop(env);
        drop(objs);
    }
    pb.finish_and_clear();
    sweep.print();
    sweep.save(&s.out, s.plots)?;
    Ok(())
}
