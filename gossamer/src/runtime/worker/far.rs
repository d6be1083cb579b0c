//! A worker's side of the pairs that cross hosts (§3.2.7–3.2.8): requests
//! and responses are prepared in the host's staging slots, put into the
//! other host's landing slots by the fabric, and read from our own landing
//! slots once they have fully arrived (see `channel::remote_slot`).
//!
//! The protocol per (client, trustee) pair is the one within a host — a
//! batch answered by a batch, in order — except that up to [`FAR_DEPTH`]
//! batches may be in flight, each in its own slots and bulk areas (batch
//! `s` in slot `s % FAR_DEPTH` of every square), so that filling and
//! serving one overlaps the crossing of the other. A staging or landing
//! slot is still never written while its reader may read it: the client
//! stages batch `s + FAR_DEPTH` only after the response to batch `s`
//! landed and was taken, and the trustee serves batches in sequence and
//! stages the response to batch `s` only after batch `s` landed. The one
//! extra rule is local: a staging slot is reused only once the fabric
//! says the put from it is done.
//!
//! A second batch goes out only behind a batch that carries at least
//! `GOSSAMER_FAR_PIPELINE` bytes of payload (64 KiB unless set; `off`
//! keeps one batch in flight): small requests gain more from waiting to
//! share one batch (one message, one system call over TCP) than from
//! crossing sooner.

use crate::channel::record::{record_words, serve_remote, Far, Responder, FALLBACK_WORDS};
use crate::channel::remote_slot::RemoteSlot;
use crate::fabric::shm::region::{Region, Square, FAR_DEPTH};
use crate::fabric::{gathers_another, Piece, MAX_PIECES};

use super::Worker;

/// One piece of a send, as a worker names it: square, local thread, offset
/// in the square, source, length, and whether it goes detached.
type Part = (Square, usize, usize, *const u8, usize, bool);

/// The batch slot (of every square) that batch `seq` of a lane uses.
fn slot_of(seq: u32) -> usize {
    seq as usize % FAR_DEPTH
}

impl Worker {
    /// Our landing slot in `square` for batch `seq` of the lane with
    /// `other`, if that batch has started to land there (its sequence
    /// number is published; `land` checks it is whole).
    fn landing(&self, square: Square, other: usize, seq: u32) -> Option<&RemoteSlot> {
        let slot = self.shared.region.remote_slot(square, self.index, other, slot_of(seq));
        (slot.seq() == seq as u64).then_some(slot)
    }

    /// Sends `pieces` (square, local thread, offset in the square, source,
    /// length, detached) to the squares of batch slot `k` of
    /// `host_thread`'s host; the last lands after the others.
    fn send_far(&self, host_thread: usize, k: usize, pieces: &[Part], keep: Vec<Vec<u8>>) -> crate::fabric::Ticket {
        let host = self.shared.placement.host_of(host_thread);
        let mut out = [Piece { src: std::ptr::null(), len: 0, offset: 0, detached: false }; MAX_PIECES];
        for (o, &(square, local, at, src, len, detached)) in out.iter_mut().zip(pieces) {
            let offset = Region::square_offset(&self.shared.shapes[host], square, host_thread, local, k) + at;
            *o = Piece { src, len, offset, detached };
        }
        let mut f = self.fabric.borrow_mut();
        let f = f.as_mut().expect("gossamer: a thread on another host but no fabric");
        // SAFETY of the sources: they lie in our region's staging slot and
        // bulk area, which we leave alone until the fabric says the send is
        // done, or in the buffers of `keep`, which the send owns.
        match f.send(host, &out[..pieces.len()], keep) {
            Ok(t) => t,
            Err(e) => panic!("gossamer: cannot reach host {host} (thread {host_thread}): {e}"),
        }
    }

    /// Whether the fabric sends pieces from any memory of ours at no extra
    /// cost (see `ThreadFabric::gathers`).
    fn fabric_gathers(&self) -> bool {
        self.fabric.borrow().as_ref().is_some_and(|f| f.gathers())
    }

    /// Whether payloads for thread `t` (on another host) may go detached:
    /// the process of its host that takes in our sends is `t`'s own, the
    /// only one that can hand a payload kept beside the region to `t`.
    fn detaches_to(&self, t: usize) -> bool {
        let host = self.shared.placement.host_of(t);
        let lands_in = self.fabric.borrow().as_ref().and_then(|f| f.lands_in(host));
        lands_in.is_some() && lands_in == self.shared.placement.rank_of(t)
    }

    /// The pieces of a send of a batch: the bulk area (`bulk_used` bytes
    /// from `bulk`, to `square` there), as the staging area's runs between
    /// the payloads sent from their own buffers (`gathered`: offset in the
    /// bulk area, bytes; the padding after each is not sent), then the slot
    /// (`range` of the staging slot at `src`, to its square there). Also
    /// how many pieces, and the buffers the send must keep. A gathered
    /// payload of `GOSSAMER_FAR_DETACH` bytes or more (see
    /// `fabric::detach_bytes`) for thread `to` goes detached when
    /// [`detaches_to`](Self::detaches_to) allows: it is a whole argument or
    /// result, which the target may keep in a buffer of its own (see
    /// `fabric::landed`).
    fn pieces(
        &self,
        to: usize,
        square: Square,
        bulk: *mut u8,
        bulk_used: usize,
        gathered: Vec<(usize, Vec<u8>)>,
        (slot_square, src, range): (Square, *const u8, std::ops::Range<usize>),
    ) -> ([Part; MAX_PIECES], usize, Vec<Vec<u8>>) {
        let me = self.index;
        let large = |bytes: &Vec<u8>| bytes.len() >= self.far_detach;
        let detach = gathered.iter().any(|(_, b)| large(b)) && self.detaches_to(to);
        let mut pieces = [(square, me, 0, std::ptr::null(), 0, false); MAX_PIECES];
        let mut n = 0;
        let mut run = |pieces: &mut [_; MAX_PIECES], at: usize, src: *const u8, len: usize, detached: bool| {
            if len > 0 {
                pieces[n] = (square, me, at, src, len, detached);
                n += 1;
            }
        };
        let mut at = 0;
        for (offset, bytes) in &gathered {
            run(&mut pieces, at, bulk.cast_const().wrapping_add(at), offset - at, false);
            run(&mut pieces, *offset, bytes.as_ptr(), bytes.len(), detach && large(bytes));
            at = (offset + bytes.len()).next_multiple_of(8).min(bulk_used);
        }
        run(&mut pieces, at, bulk.cast_const().wrapping_add(at), bulk_used - at, false);
        pieces[n] = (slot_square, me, range.start, src.wrapping_add(range.start), range.len(), false);
        (pieces, n + 1, gathered.into_iter().map(|(_, bytes)| bytes).collect())
    }

    /// Whether the put `ticket` is done (its staging slot free), driving
    /// progress once if not.
    fn put_done(&self, ticket: crate::fabric::Ticket) -> bool {
        let mut f = self.fabric.borrow_mut();
        let f = f.as_mut().expect("gossamer: no fabric");
        f.done(ticket) || (f.progress() && f.done(ticket))
    }

    /// Sends the queued requests for trustee `t` on another host: large
    /// payloads first (into the pair's bulk area there), then the slot that
    /// names them, in one send. With a batch already in flight, only if
    /// that batch is large (see the module's documentation) and a slot is
    /// free.
    pub(super) fn flush_far(&self, t: usize) -> bool {
        let mut lane = self.lanes[t].borrow_mut();
        if lane.pending.is_empty() || lane.far.len() >= FAR_DEPTH {
            return false;
        }
        if lane.far.back().is_some_and(|&(_, bulk)| bulk < self.far_pipeline) {
            return false;
        }
        let seq = lane.flag.wrapping_add(1);
        let k = slot_of(seq);
        if let Some(p) = lane.puts[k] {
            if !self.put_done(p) {
                return false;
            }
            lane.puts[k] = None;
        }
        let region = &self.shared.region;
        let staging = region.remote_slot(Square::RequestStaging, self.index, t, k);
        let far_bulk = region.shape().far_bulk;
        let bulk = if far_bulk > 0 {
            region.far_bulk(Square::RequestBulkStaging, self.index, t, k)
        } else {
            std::ptr::null_mut()
        };
        let mut gathered = Vec::new();
        let gather = if self.fabric_gathers() { Some(&mut gathered) } else { None };
        // SAFETY: our staging slot and bulk area `k` for `t`; the puts from
        // the last batch staged there are done (checked above: the slot's
        // put is the last one) and nobody else writes them.
        let ((count, bulk_used), _, range) =
            unsafe { staging.stage(seq as u64, 0, |w| lane.fill(w, bulk, far_bulk, gather)) };
        assert!(count > 0, "gossamer: a request larger than a slot was queued");
        lane.flag = seq;
        lane.in_flight += count;
        lane.far.push_back((count, bulk_used));
        let slot = (Square::RequestLanding, staging.as_ptr(), range);
        let (pieces, n, keep) = self.pieces(t, Square::RequestBulkLanding, bulk, bulk_used, gathered, slot);
        lane.puts[k] = Some(self.send_far(t, k, &pieces[..n], keep));
        true
    }

    /// Completes the oldest batch in flight to trustee `t` on another host
    /// if its responses have fully landed.
    pub(super) fn poll_far(&self, t: usize) -> bool {
        let Some((seq, in_flight)) = self.lanes[t].borrow().oldest_far() else { return false };
        let Some(batch) = self.landing(Square::ResponseLanding, t, seq).and_then(|s| s.land(seq as u64)) else {
            return false;
        };
        if batch.count() != in_flight {
            self.malformed_responses(t, &format!("{} responses to {in_flight} requests", batch.count()));
        }
        // Results in the bulk area are read from this batch's.
        self.far_landing.set(slot_of(seq));
        batch.read(|r| {
            while let Some(rec) = r.try_next(record_words).unwrap_or_else(|why| self.malformed_responses(t, why)) {
                let c = self.lanes[t].borrow_mut().completions.pop_front().expect("gossamer: response without request");
                // SAFETY: the record is the response to this completion's
                // request (responses come in request order). The
                // completion may run user code: it never unwinds into the
                // loop.
                let run = || unsafe { (c.run)(self, t, c.data, rec) };
                if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
                    self.report_panic("completion", p);
                }
            }
        });
        let mut lane = self.lanes[t].borrow_mut();
        lane.in_flight -= in_flight;
        lane.far.pop_front();
        true
    }

    /// Serves the next batch from client `c` on another host, if it has
    /// fully landed and our staging slot for its answer is free.
    pub(super) fn serve_far(&self, c: usize) -> bool {
        let me = self.index;
        let seq = self.served[c].get().wrapping_add(1);
        let Some(landing) = self.landing(Square::RequestLanding, c, seq) else { return false };
        let k = slot_of(seq);
        let put = &self.resp_puts[c * FAR_DEPTH + k];
        if let Some(p) = put.get() {
            if !self.put_done(p) {
                return false;
            }
            put.set(None);
        }
        let Some(batch) = landing.land(seq as u64) else { return false };
        let region = &self.shared.region;
        let staging = region.remote_slot(Square::ResponseStaging, me, c, k);
        let far_bulk = region.shape().far_bulk;
        let (req_bulk, resp_bulk) = if far_bulk > 0 {
            (
                region.far_bulk(Square::RequestBulkLanding, me, c, k),
                region.far_bulk(Square::ResponseBulkStaging, me, c, k),
            )
        } else {
            (std::ptr::null_mut(), std::ptr::null_mut())
        };
        let far = Far { client: c, req_bulk, resp_bulk, bulk_bytes: far_bulk };
        let mut gathered = Vec::new();
        let gather = if self.fabric_gathers() { Some(&mut gathered) } else { None };
        let mut cache = self.codes[c].get();
        let g = self.enter_delegated();
        let kept = self.batch.open();
        // Whose batch this is, for the requests that answer later (relays
        // of moved properties) and those that count their clients.
        let of = self.batch_of(c);
        // SAFETY: our staging slot for `c`, free (checked above); the
        // batch is a checked private copy; each request runs once.
        let (bulk_used, _, range) = unsafe {
            staging.stage(seq as u64, FALLBACK_WORDS, |w| {
                let mut out = Responder::far(w, batch.count() as usize, far).gathering(gather, gathers_another);
                batch.read(|r| serve_remote(r, &mut out, &mut cache));
                out.bulk_used()
            })
        };
        drop(kept);
        drop(of);
        drop(g);
        self.codes[c].set(cache);
        self.served[c].set(seq);
        let slot = (Square::ResponseLanding, staging.as_ptr(), range);
        let (pieces, n, keep) = self.pieces(c, Square::ResponseBulkLanding, resp_bulk, bulk_used, gathered, slot);
        put.set(Some(self.send_far(c, k, &pieces[..n], keep)));
        true
    }

    /// Whether client `c` (on another host) has its next batch for us.
    pub(super) fn far_request_waiting(&self, c: usize) -> bool {
        self.landing(Square::RequestLanding, c, self.served[c].get().wrapping_add(1)).is_some()
    }

    /// Whether trustee `t` (on another host) answered our oldest batch in
    /// flight to it.
    pub(super) fn far_response_waiting(&self, t: usize) -> bool {
        let oldest = self.lanes[t].borrow().oldest_far();
        oldest.is_some_and(|(seq, _)| self.landing(Square::ResponseLanding, t, seq).is_some())
    }

    /// Drives the fabric; true if anything happened.
    pub(super) fn progress_fabric(&self) -> bool {
        match self.fabric.borrow_mut().as_mut() {
            Some(f) => f.progress(),
            None => false,
        }
    }

    /// Whether puts of ours are still in flight.
    pub(super) fn fabric_busy(&self) -> bool {
        self.fabric.borrow().as_ref().is_some_and(|f| f.busy())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::client::Lane;

    #[test]
    fn the_oldest_batch_in_flight_is_named_by_its_sequence_number_across_wrapping() {
        let mut lane = Lane::default();
        assert_eq!(lane.oldest_far(), None);
        lane.flag = 7;
        lane.far.push_back((3, 100));
        assert_eq!(lane.oldest_far(), Some((7, 3)));
        lane.flag = 8;
        lane.far.push_back((5, 70_000));
        assert_eq!(lane.oldest_far(), Some((7, 3)), "the older of two batches");
        lane.far.pop_front();
        assert_eq!(lane.oldest_far(), Some((8, 5)));
        // Sequence numbers wrap: batch u32::MAX is older than batch 0.
        lane.flag = 0;
        lane.far.clear();
        lane.far.push_back((1, 0));
        lane.far.push_back((2, 0));
        assert_eq!(lane.oldest_far(), Some((u32::MAX, 1)));
    }
}
