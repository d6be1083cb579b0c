//! The trustee side of a worker: serving the request slots of every client
//! and writing the responses, and the registry of the properties it owns.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use crate::channel::record::{dispatch, record_words, serve_remote, take_env, Far, Responder, FALLBACK_WORDS};
use crate::channel::slot::Word;
use crate::runtime::property::Header;

use super::Worker;

/// Runs a message for a thread (no property) and answers `()`.
pub(super) unsafe fn thread_shim<F: FnOnce()>(_prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: `env` holds the `F` that `Worker::send` encoded with this
    // shim; from another process, it is read only inside the record.
    match unsafe { take_env::<F>(env as *const Word, out) } {
        Ok(f) => out.put_any::<()>(catch_unwind(AssertUnwindSafe(f))),
        Err(m) => out.put_any::<()>(Err(Box::new(m))),
    }
}

impl Worker {
    // ----- trustee side --------------------------------------------------

    pub(super) fn serve(&self) -> bool {
        let mut did = false;
        let me = self.index;
        for c in 0..self.shared.n {
            if !self.shared.same_host(c) {
                did |= self.serve_far(c);
                continue;
            }
            let req = self.shared.matrix.request(c, me);
            let flag = req.flag();
            if flag == self.served[c].get() {
                continue;
            }
            let resp = self.shared.matrix.response(c, me);
            let observed = if crate::runtime::profile::active() {
                crate::runtime::profile::counters::batch_start(self)
            } else {
                None
            };
            let mut batch = 0usize;
            let g = self.enter_delegated();
            let kept = self.batch.open();
            let of = self.batch_of(c);
            if self.shared.is_local(c) {
                // SAFETY: the flag change means client `c` published a
                // complete batch and waits for our answer before touching
                // either slot; each request is dispatched exactly once.
                unsafe {
                    req.read(|r| {
                        let count = r.count() as usize;
                        batch = count;
                        resp.write(FALLBACK_WORDS, |w| {
                            let mut out = Responder::new(w, count);
                            while let Some(rec) = r.next(record_words) {
                                dispatch(rec, &mut out);
                            }
                        })
                    })
                };
            } else {
                let region = &self.shared.region;
                let far = Far {
                    client: c,
                    req_bulk: region.bulk(c, me, false),
                    resp_bulk: region.bulk(c, me, true),
                    bulk_bytes: region.bulk_bytes(),
                };
                let mut cache = self.codes[c].get();
                // SAFETY: as above, and the pair's bulk areas follow the
                // same ownership as its slots.
                unsafe {
                    req.read(|r| {
                        let count = r.count() as usize;
                        batch = count;
                        resp.write(FALLBACK_WORDS, |w| {
                            let mut out = Responder::far(w, count, far);
                            serve_remote(r, &mut out, &mut cache);
                        })
                    })
                };
                self.codes[c].set(cache);
            }
            drop(kept);
            drop(of);
            drop(g);
            resp.publish(flag);
            self.served[c].set(flag);
            self.shared.wake(c);
            if let Some(start) = observed {
                crate::runtime::profile::counters::batch_served(self, batch, start);
            }
            did = true;
        }
        did
    }

    // ----- properties ------------------------------------------------------

    pub(crate) fn register(&self, h: *mut Header) {
        let mut p = self.properties.borrow_mut();
        // SAFETY: `h` is a live property header owned by this trustee.
        unsafe { (*h).index.set(p.len()) };
        p.push(h);
    }

    /// How many properties this trustee keeps registered.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn registered(&self) -> usize {
        self.properties.borrow().len()
    }

    pub(crate) fn unregister(&self, h: *mut Header) {
        let mut p = self.properties.borrow_mut();
        // SAFETY: `h` is registered here, so its index is in range.
        let i = unsafe { (*h).index.get() };
        debug_assert!(ptr::eq(p[i], h));
        p.swap_remove(i);
        if i < p.len() {
            // SAFETY: every registered header is live.
            unsafe { (*p[i]).index.set(i) };
        }
    }
}
