//! Floors under the echo benchmark between processes: the same traffic as
//! the `echo` example with 2 threads (each thread both serves and sends,
//! half of its requests to itself, the rest in batches to the other
//! thread), without a runtime, in two forms:
//!
//! * **moved**: a request's `Vec<u8>` goes to the other thread by pointer
//!   and comes back the same way, as it does within one process;
//! * **copied**: the least a transport between processes does when the
//!   serving closure takes an owned `Vec<u8>` and returns one: the payload
//!   is copied into the pair's request area, out of it into a new `Vec`
//!   for the closure, the answer into the pair's response area, and out
//!   into a new `Vec` for the caller. (Reusing freed buffers for those
//!   two `Vec`s instead of allocating them was measured slower.)
//!
//! A batch's buffers are reused from batch to batch and cross between the
//! threads by a channel, so the copied payloads land in lines the other
//! core touched last, as in a shared-memory area. The ratio copied ÷ moved
//! bounds what any copying transport can reach against one process.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use crate::error::{expect_eq, BenchError, Result};
use crate::settings::Settings;

/// Requests to the other thread per batch at most.
const BATCH: usize = 32;

/// One batch's buffers, for either form.
#[derive(Default)]
struct Batch {
    /// Moved: the requests' payloads, then the answers.
    moved: Vec<Vec<u8>>,
    answers: Vec<Vec<u8>>,
    /// Copied: the payloads' lengths, the request area and the response area.
    lens: Vec<usize>,
    requests: Vec<u8>,
    responses: Vec<u8>,
}

impl Batch {
    fn len(&self) -> usize {
        self.moved.len() + self.lens.len()
    }
}

/// The serving closure of the echo example: counts, answers the payload.
#[inline(never)]
fn echo(served: &mut u64, p: Vec<u8>) -> Vec<u8> {
    *served += 1;
    p
}

/// Serves one batch in place.
fn serve(b: &mut Batch, served: &mut u64) {
    for p in b.moved.drain(..) {
        let a = echo(served, p);
        b.answers.push(a);
    }
    b.responses.clear();
    let mut at = 0;
    for &len in &b.lens {
        let p = b.requests[at..at + len].to_vec();
        at += len;
        let a = echo(served, p);
        b.responses.extend_from_slice(&a);
    }
}

/// Takes the answers of one batch; returns how many there were.
fn consume(b: &mut Batch, size: usize) -> u64 {
    let mut n = 0;
    for a in b.answers.drain(..) {
        debug_assert_eq!(a.len(), size);
        black_box(a);
        n += 1;
    }
    let mut at = 0;
    for &len in &b.lens {
        let a = b.responses[at..at + len].to_vec();
        at += len;
        debug_assert_eq!(a.len(), size);
        black_box(a);
        n += 1;
    }
    b.lens.clear();
    b.requests.clear();
    n
}

/// One thread's ends of its two lanes.
struct Ends {
    requests_out: Sender<Batch>,
    answers_in: Receiver<Batch>,
    requests_in: Receiver<Batch>,
    answers_out: Sender<Batch>,
}

/// One thread of the floor: sends `ops` echoes (half to itself, served at
/// once) and serves the other thread's batches until both are done.
/// Returns (echoes completed, requests served).
fn thread_loop(ends: Ends, ops: u64, size: usize, copy: bool, seed: u64, done: [Arc<AtomicBool>; 2]) -> (u64, u64) {
    let payload = vec![0xa5u8; size];
    let mut served = 0u64;
    let mut completed = 0u64;
    let mut issued = 0u64;
    let mut spare = Some(Batch::default());
    let mut x = seed | 1;
    let mut marked = false;
    loop {
        if let Ok(mut b) = ends.requests_in.try_recv() {
            serve(&mut b, &mut served);
            if ends.answers_out.send(b).is_err() {
                break;
            }
        }
        if spare.is_none() {
            if let Ok(mut b) = ends.answers_in.try_recv() {
                completed += consume(&mut b, size);
                spare = Some(b);
            }
        }
        if let Some(mut b) = spare.take() {
            while issued < ops && b.len() < BATCH {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                issued += 1;
                if x & 1 == 0 {
                    // To this thread: served at once, as the local shortcut.
                    black_box(echo(&mut served, payload.clone()));
                    completed += 1;
                } else if copy {
                    let p = payload.clone();
                    b.requests.extend_from_slice(&p);
                    b.lens.push(p.len());
                } else {
                    b.moved.push(payload.clone());
                }
            }
            if b.len() > 0 {
                if ends.requests_out.send(b).is_err() {
                    break;
                }
            } else {
                spare = Some(b);
            }
        }
        if issued == ops && spare.is_some() {
            if !marked {
                done[0].store(true, Ordering::Release);
                marked = true;
            }
            if done[1].load(Ordering::Acquire) {
                break;
            }
        }
        std::hint::spin_loop();
    }
    (completed, served)
}

/// Echoes per second (millions) of the floor, 2 threads, `size`-byte
/// payloads, `copy` or moved.
fn floor(s: &Settings, ops: u64, size: usize, copy: bool) -> Result<f64> {
    let ops = ops / 2 + 1;
    let (req01, req01_rx) = channel();
    let (req10, req10_rx) = channel();
    let (ans01, ans01_rx) = channel();
    let (ans10, ans10_rx) = channel();
    let ends = [
        Ends { requests_out: req01, answers_in: ans10_rx, requests_in: req10_rx, answers_out: ans01 },
        Ends { requests_out: req10, answers_in: ans01_rx, requests_in: req01_rx, answers_out: ans10 },
    ];
    let flags = [Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false))];
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let pinned = s.pin && cores.len() > 1;
    let started = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let handles: Vec<_> = ends
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let done = [flags[i].clone(), flags[1 - i].clone()];
            let cores = cores.clone();
            let started = started.clone();
            thread::spawn(move || {
                if pinned {
                    core_affinity::set_for_current(cores[i % cores.len()]);
                }
                started.fetch_add(1, Ordering::AcqRel);
                while started.load(Ordering::Acquire) < 2 {
                    std::hint::spin_loop();
                }
                thread_loop(e, ops, size, copy, 0x9e37_79b9_7f4a_7c15 ^ i as u64, done)
            })
        })
        .collect();
    let mut completed = 0;
    let mut served = 0;
    for h in handles {
        let (c, v) = h.join().map_err(|_| BenchError::Other("echo floor thread panicked".into()))?;
        completed += c;
        served += v;
    }
    let secs = t.elapsed().as_secs_f64();
    expect_eq("echo floor: echoes completed", completed, 2 * ops + s.fault as u64)?;
    expect_eq("echo floor: echoes served", served, 2 * ops)?;
    Ok(completed as f64 / secs / 1e6)
}

/// The moved floor at 256 bytes.
pub fn moved_256(s: &Settings, ops: u64) -> Result<f64> {
    floor(s, ops, 256, false)
}

/// The copied floor at 256 bytes.
pub fn copied_256(s: &Settings, ops: u64) -> Result<f64> {
    floor(s, ops, 256, true)
}

/// The moved floor at 1 KiB.
pub fn moved_1k(s: &Settings, ops: u64) -> Result<f64> {
    floor(s, ops, 1024, false)
}

/// The copied floor at 1 KiB.
pub fn copied_1k(s: &Settings, ops: u64) -> Result<f64> {
    floor(s, ops, 1024, true)
}
