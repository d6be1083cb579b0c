//! The `Follow` migration policy: a property that moves, by itself, to the
//! trustee of the thread that issues most of its requests
//! ([`Trust::set_migration_policy`]).
//!
//! # How it decides
//!
//! A property with the policy carries a [`State`] in the cell that holds
//! its value, and a bit (`FOLLOW`) in the word its trustee tests before
//! every closure (`property::check_reachable`, which then calls
//! [`Follow::observe`]); a property without the policy pays nothing more
//! than that test, which it paid already. With the bit set, the trustee
//! counts each request, before it runs, for the thread that issued it: the
//! client whose batch it serves, or itself for a request of one of its own
//! fibers. (Requests an origin or a record relays count for the relaying
//! thread; a client that keeps sending learns its direct route after a
//! few, see `direct`.)
//!
//! Every `window` requests the trustee closes a window, and sooner once the
//! window is `window_ms` old and holds at least [`MIN_WINDOW`] requests (so
//! a property used a few hundred times a second still follows its users):
//! if one thread of this process issued at least `share_percent` % of them
//! and it is not the holder, the property moves there. Hysteresis keeps it from
//! bouncing: after a move (and after a move is asked for) the property
//! sits out `rest_windows` windows, and going back to the trustee it came
//! from takes `return_percent` %.
//!
//! # How it moves
//!
//! With the machinery of `migrate_to` (`start_move` on the origin's
//! thread), so every guarantee of a move holds: each request runs once,
//! each client's in order, every trust stays valid. The trustee that
//! decides is in the middle of serving, so it never moves the value
//! itself:
//! * if it holds the value in the origin cell (the property never moved),
//!   it queues the move behind the current closure (`Worker::defer`); the
//!   cell lives until then, as the worker runs deferred work before it
//!   releases any property;
//! * otherwise it sends the origin's thread a message with the origin's
//!   address and the trust id the origin holds in the holder's cell. Ids
//!   are never reused, so the origin's thread moves the property only if
//!   it still keeps a moved origin at that address (`origin::holding`)
//!   that forwards to this very cell under that id: an origin released
//!   meanwhile, or a later property at the same address, is left alone.
//!
//! The state travels with the value (`move_value` calls [`carry`]), its
//! counts cleared.

use std::any::Any;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::follow_control::{self, Control};
use super::{call, relay, run_here, start_move, Request};
use crate::channel::record::{take_value, Responder};
use crate::channel::slot::Word;
use crate::error::Error;
use crate::runtime::context;
use crate::runtime::property::{self, Follow, Header, PropertyCell, SendPtr};
use crate::runtime::worker::{Call, Completion, Worker};
use crate::trust::Trust;

/// Where a property runs while the program runs: see
/// [`Trust::set_migration_policy`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MigrationPolicy {
    /// The property stays where it is, unless moved with
    /// [`Trust::migrate_to`] (the default).
    #[default]
    Stay,
    /// The property moves to the trustee of the thread that issues most of
    /// its requests.
    Follow(FollowParams),
}

/// The knobs of [`MigrationPolicy::Follow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowParams {
    /// Requests per window (16 to 2^20; default 1024). A decision is taken
    /// at the end of each window, from its requests only.
    pub window: u32,
    /// The age, in milliseconds, at which a window closes before it has
    /// `window` requests, provided it has at least 16 (0 to 60000;
    /// default 100; 0: windows close by count only). The clock is read
    /// every 8 requests, not on each.
    pub window_ms: u32,
    /// The share of a window's requests, in percent, that one thread must
    /// have issued for the property to move to it (51 to 100; default 60).
    pub share_percent: u8,
    /// The share needed to move back to the trustee the property last
    /// left (`share_percent` to 100; default 80).
    pub return_percent: u8,
    /// Windows the property sits out after a move, or after asking for
    /// one (0 to 2^16; default 4).
    pub rest_windows: u32,
}

impl Default for FollowParams {
    fn default() -> Self {
        FollowParams { window: 1024, window_ms: 100, share_percent: 60, return_percent: 80, rest_windows: 4 }
    }
}

impl FollowParams {
    /// `Err` naming the first parameter outside its bounds.
    pub fn check(&self) -> Result<(), Error> {
        let bad = |name, value: u32, allowed| Err(Error::BadMigrationParam { name, value: value.to_string(), allowed });
        if !(MIN_WINDOW..=1 << 20).contains(&self.window) {
            return bad("window", self.window, "16 to 1048576 requests");
        }
        if self.window_ms > 60_000 {
            return bad("window_ms", self.window_ms, "0 to 60000 milliseconds");
        }
        if !(51..=100).contains(&self.share_percent) {
            return bad("share_percent", self.share_percent.into(), "51 to 100 (a majority)");
        }
        if !(self.share_percent..=100).contains(&self.return_percent) {
            return bad("return_percent", self.return_percent.into(), "share_percent to 100");
        }
        if self.rest_windows > 1 << 16 {
            return bad("rest_windows", self.rest_windows, "0 to 65536");
        }
        Ok(())
    }
}

impl<T: Send + 'static> Trust<T> {
    /// Sets how the property chooses its trustee from now on, for every
    /// trust to it: [`MigrationPolicy::Stay`] (the default) or
    /// [`MigrationPolicy::Follow`], which moves it to the trustee of the
    /// thread that issued most of its recent requests (see
    /// [`FollowParams`]), with the guarantees of
    /// [`migrate_to`](Trust::migrate_to): every request runs once, each
    /// fiber's in issue order, and every trust stays valid. Returns once
    /// the policy is in place.
    ///
    /// Only the trustee that holds the value counts requests, and only for
    /// properties that follow: others pay nothing.
    ///
    /// A property that follows is listed by `gossamer top` (its FOLLOW
    /// table, under [`profile_id`](Trust::profile_id)), which can pause,
    /// resume and retune it while the program runs (`--set-follow`). A
    /// later call here sets these parameters again and turns it back on.
    ///
    /// ```
    /// use gossamer::{FollowParams, MigrationPolicy};
    ///
    /// let rt = gossamer::Runtime::builder().workers(2).build()?;
    /// rt.block_on(|| {
    ///     let counter = gossamer::trustee(0).entrust(0u64);
    ///     let params = FollowParams { window: 64, ..FollowParams::default() };
    ///     counter.set_migration_policy(MigrationPolicy::Follow(params))?;
    ///     // Thread 1 is the only user: the counter moves to its trustee.
    ///     let c = counter.clone();
    ///     let on = gossamer::spawn_on(1, move || {
    ///         for _ in 0..1000 {
    ///             c.apply(|n| *n += 1);
    ///         }
    ///         c.apply(|_| gossamer::current_thread())
    ///     });
    ///     assert_eq!(on.join().unwrap(), Some(1));
    ///     assert_eq!(counter.apply(|n| *n), 1000);
    ///     Ok::<(), gossamer::Error>(())
    /// })?;
    /// # Ok::<(), gossamer::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadMigrationParam`] for a parameter outside its bounds
    /// (nothing changes).
    ///
    /// # Panics
    /// As [`migrate_to`](Trust::migrate_to): outside a fiber of the trust's
    /// runtime, in delegated context, for a property of another process,
    /// or while a launched closure holds the property's latch.
    pub fn set_migration_policy(&self, policy: MigrationPolicy) -> Result<(), Error> {
        if let MigrationPolicy::Follow(p) = policy {
            p.check()?;
        }
        let w = self.worker_here("set_migration_policy");
        let origin = self.cell.as_ptr();
        call(
            w,
            self.trustee as usize,
            origin,
            SetPolicy { policy, origin_t: self.trustee as usize, origin: origin.addr() },
        );
        Ok(())
    }
}

/// The fewest requests a window closed by its age holds (the least
/// `window` too).
pub(crate) const MIN_WINDOW: u32 = 16;
/// A window's age is checked once every this many requests.
const CLOCK_EVERY: u32 = 8;

/// Moves the property whose origin is the given cell of this thread to a
/// trustee (`start_move` for its type).
type Mover = unsafe fn(&Worker, *mut Header, usize);

/// The follow state of a property, in the cell that holds its value.
pub(crate) struct State {
    /// Its parameters and on/off switch, which `gossamer top` may change
    /// (see `follow_control`).
    control: Arc<Control>,
    /// Set while the switch is off: the window in progress then is stale.
    paused: bool,
    /// The origin: its trustee and cell address.
    origin_t: usize,
    origin: usize,
    mover: Mover,
    /// Requests of the current window, per issuing thread.
    counts: Vec<u32>,
    /// Requests of the current window in all.
    seen: u32,
    /// When the current window began.
    started: Instant,
    /// Windows left to sit out.
    rest: u32,
    /// The trustee the property last moved away from.
    came_from: Option<usize>,
}

impl State {
    fn new(control: Arc<Control>, origin_t: usize, origin: usize, mover: Mover, threads: usize) -> State {
        let counts = vec![0; threads];
        let started = Instant::now();
        State { control, paused: false, origin_t, origin, mover, counts, seen: 0, started, rest: 0, came_from: None }
    }

    /// Whether the current window, with `seen` requests, is old enough to
    /// close (reads the clock only every `CLOCK_EVERY` requests).
    fn aged(&self, params: &FollowParams, now: &impl Fn() -> Instant) -> bool {
        let ms = params.window_ms;
        ms > 0
            && self.seen >= MIN_WINDOW
            && self.seen % CLOCK_EVERY == 0
            && now().saturating_duration_since(self.started) >= Duration::from_millis(ms.into())
    }

    /// Counts one request from `client`; at the end of a window, the
    /// trustee the property should move to from `here`, if any (`local`:
    /// whether a trustee is in this process; `now`: the clock). The
    /// settings are read once per request, here.
    fn count(
        &mut self,
        client: usize,
        here: usize,
        local: impl Fn(usize) -> bool,
        now: impl Fn() -> Instant,
    ) -> Option<usize> {
        let (params, on) = self.control.get();
        if !on {
            // Paused from `gossamer top`: nothing counts meanwhile, and the
            // window then in progress is dropped when it resumes.
            self.paused = true;
            return None;
        }
        if std::mem::take(&mut self.paused) {
            self.new_window(now());
        }
        if let Some(c) = self.counts.get_mut(client) {
            *c += 1;
        }
        self.seen += 1;
        if self.seen < params.window && !self.aged(&params, &now) {
            return None;
        }
        let total = u64::from(self.seen);
        let (best, n) = self.counts.iter().enumerate().max_by_key(|&(_, &n)| n).map_or((0, 0), |(i, &n)| (i, n));
        self.new_window(now());
        if self.rest > 0 {
            self.rest -= 1;
            return None;
        }
        let need = if self.came_from == Some(best) { params.return_percent } else { params.share_percent };
        if best == here || u64::from(n) * 100 < u64::from(need) * total || !local(best) {
            return None;
        }
        // No second request while this one is under way.
        self.rest = params.rest_windows;
        Some(best)
    }

    /// Starts a window at `at`, its counts cleared.
    fn new_window(&mut self, at: Instant) {
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.seen = 0;
        self.started = at;
    }

    /// The property moved from trustee `from` to `to`: a fresh start,
    /// resting.
    fn moved(&mut self, from: usize, to: usize) {
        self.new_window(Instant::now());
        self.rest = self.control.get().0.rest_windows;
        self.came_from = Some(from);
        self.control.moved_to(to);
    }
}

impl Drop for State {
    /// The property no longer follows (its policy is `Stay` again, or its
    /// value is gone): `gossamer top` stops listing it.
    fn drop(&mut self) {
        follow_control::unregister(&self.control);
    }
}

impl Follow for State {
    /// Counts the request about to run, and asks for a move at the end of
    /// a window that calls for one.
    unsafe fn observe(&mut self, h: *const Header) {
        let Some(w) = context::current() else { return };
        // A request a trustee serves comes from the client of the batch;
        // one it runs outside a batch, from one of its own fibers (or
        // callbacks).
        let client = w.batch_client().unwrap_or(w.index);
        let Some(to) = self.count(client, w.index, |t| w.shared.is_local(t), Instant::now) else { return };
        tracing::debug!(trustee = w.index, to, "a following property moves to where its requests come from");
        // SAFETY: per the contract.
        unsafe { ask(w, self, h.cast_mut(), to) }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Starts moving the property whose value is in the cell `h` of this
/// thread (its follow state `st`) to trustee `to`, after the closure that
/// is about to run.
///
/// # Safety
/// As for [`Follow::observe`].
unsafe fn ask(w: &Worker, st: &State, h: *mut Header, to: usize) {
    let (origin_t, origin, mover) = (st.origin_t, st.origin, st.mover);
    if origin_t == w.index && h.addr() == origin {
        // Never moved: this cell is the origin, and it lives until the
        // deferred move has run (deferred work runs before releases).
        let o = SendPtr(h);
        w.defer(Box::new(move || {
            let o = o;
            let w = context::current().expect("gossamer: deferred move outside its worker");
            // SAFETY: the origin, live (above), on its thread, between closures.
            unsafe { mover(w, o.0, to) }
        }));
        return;
    }
    // SAFETY: per the contract.
    let Some(id) = (unsafe { property::sole_id(h) }) else { return };
    let holder = (w.index, SendPtr(h));
    let run = move || {
        let holder = holder;
        let w = context::current().expect("gossamer: runtime message outside a worker");
        if let Some(o) = super::origin::holding(origin, holder.0, holder.1 .0, id) {
            // SAFETY: a live moved origin of this thread that forwards to
            // the holder that asked (`holding`), between closures.
            unsafe { mover(w, o, to) }
        }
    };
    if origin_t == w.index {
        w.defer(Box::new(run));
    } else {
        w.send(origin_t, move || {
            let w = context::current().expect("gossamer: runtime message outside a worker");
            w.defer(Box::new(run));
        });
    }
}

/// `start_move` for a property of type `T`.
///
/// # Safety
/// As for `start_move`: `origin` is a live origin cell of this thread, no
/// closure on the property running.
unsafe fn mover<T: Send + 'static>(w: &Worker, origin: *mut Header, to: usize) {
    // SAFETY: per the contract; the state that names this mover was made
    // for a property of type `T`.
    if let Err(why) = unsafe { start_move(w, origin.cast::<PropertyCell<T>>(), to) } {
        tracing::debug!("a following property stays: {why}");
    }
}

/// Hands the follow state of `old` (if any), whose value moved out of
/// this thread into the fresh cell `new` for trustee `to`, to `new`.
///
/// # Safety
/// `old` must be a live cell of this thread whose value was just moved
/// out; `new` a cell not yet published to any other thread.
pub(super) unsafe fn carry(w: &Worker, old: *mut Header, new: *mut Header, to: usize) {
    // SAFETY: per the contract.
    if let Some(mut st) = unsafe { property::take_follow(old) } {
        if let Some(st) = st.as_any_mut().downcast_mut::<State>() {
            st.moved(w.index, to);
        }
        // SAFETY: per the contract.
        unsafe { property::put_follow(new, st) };
    }
}

/// Sets the policy on the cell that holds the value.
struct SetPolicy {
    policy: MigrationPolicy,
    origin_t: usize,
    origin: usize,
}

impl<T: Send + 'static> Request<T> for SetPolicy {
    type Out = ();

    fn enqueue(self, w: &Worker, t: usize, cell: *mut PropertyCell<T>, c: Completion) {
        w.enqueue(t, policy_shim::<T>, cell.cast(), self, c, Call::Copied);
    }

    fn run(self, w: &Worker, cell: *mut PropertyCell<T>) -> thread::Result<()> {
        let h = cell.cast::<Header>();
        match self.policy {
            // SAFETY: per the trait: the value is here, on this thread,
            // between closures.
            MigrationPolicy::Stay => drop(unsafe { property::take_follow(h) }),
            MigrationPolicy::Follow(params) => {
                // SAFETY: as above.
                match unsafe { property::follow_state(h) }.and_then(|st| st.as_any_mut().downcast_mut::<State>()) {
                    Some(st) => st.control.set(params, true),
                    None => {
                        let control = Arc::new(Control::new(w.shared.id, self.origin, w.index, params));
                        follow_control::register(&control);
                        let st = State::new(control, self.origin_t, self.origin, mover::<T>, w.shared.n);
                        // SAFETY: as above.
                        unsafe { property::put_follow(h, Box::new(st)) };
                    }
                }
            }
        }
        Ok(())
    }
}

/// Serves a [`SetPolicy`] on a cell: there if the value is, else relayed.
unsafe fn policy_shim<T: Send + 'static>(prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded by `SetPolicy::enqueue`.
    let req: SetPolicy = unsafe { take_value(env as *const Word) };
    let w = context::current().expect("gossamer: a request served outside a worker");
    let cell = prop.cast::<PropertyCell<T>>();
    // SAFETY: `prop` is a live cell of this trustee (a request names it),
    // served in a client's batch, between closures.
    let r = if unsafe { property::moved(prop.cast()) } {
        // SAFETY: as above.
        unsafe { relay::<T, _>(prop.cast(), req) }
    } else {
        run_here(w, cell, req)
    };
    out.put_any::<()>(r);
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe fn no_move(_: &Worker, _: *mut Header, _: usize) {}

    fn with(params: FollowParams) -> State {
        State::new(Arc::new(Control::new(0, 0, 0, params)), 0, 0, no_move, 4)
    }

    fn state(window: u32) -> State {
        with(FollowParams { window, window_ms: 0, share_percent: 60, return_percent: 80, rest_windows: 2 })
    }

    /// Changes the parameters as `gossamer top` would.
    fn retune(st: &State, f: impl FnOnce(&mut FollowParams)) {
        let (mut p, on) = st.control.get();
        f(&mut p);
        st.control.set(p, on);
    }

    fn feed(st: &mut State, here: usize, from: &[(usize, u32)]) -> Option<usize> {
        feed_at(st, here, from, Instant::now)
    }

    fn feed_at(st: &mut State, here: usize, from: &[(usize, u32)], now: impl Fn() -> Instant) -> Option<usize> {
        let mut out = None;
        for &(c, n) in from {
            for _ in 0..n {
                if let Some(to) = st.count(c, here, |_| true, &now) {
                    assert!(out.is_none(), "two decisions in one window");
                    out = Some(to);
                }
            }
        }
        out
    }

    #[test]
    fn a_clear_majority_elsewhere_moves_it_and_then_it_rests() {
        let mut st = state(100);
        assert_eq!(feed(&mut st, 0, &[(2, 60), (1, 40)]), Some(2));
        // Resting: two windows without a decision, however clear.
        assert_eq!(feed(&mut st, 0, &[(2, 100)]), None);
        assert_eq!(feed(&mut st, 0, &[(2, 100)]), None);
        assert_eq!(feed(&mut st, 0, &[(2, 100)]), Some(2));
    }

    #[test]
    fn no_majority_or_the_holder_itself_keeps_it() {
        let mut st = state(100);
        assert_eq!(feed(&mut st, 0, &[(2, 59), (1, 41)]), None);
        assert_eq!(feed(&mut st, 0, &[(0, 90), (1, 10)]), None);
        assert_eq!(feed(&mut st, 0, &[(1, 25), (2, 25), (3, 25), (0, 25)]), None);
    }

    #[test]
    fn going_back_takes_the_stronger_share() {
        let mut st = state(100);
        st.moved(1, 2);
        assert_eq!(feed(&mut st, 2, &[(1, 100)]), None);
        assert_eq!(feed(&mut st, 2, &[(1, 100)]), None);
        assert_eq!(feed(&mut st, 2, &[(1, 79), (2, 21)]), None);
        assert_eq!(feed(&mut st, 2, &[(1, 80), (2, 20)]), Some(1));
    }

    #[test]
    fn an_old_window_closes_early_once_it_holds_enough_requests() {
        let t0 = Instant::now();
        let mut st = with(FollowParams {
            window: 1 << 20,
            window_ms: 50,
            share_percent: 60,
            return_percent: 80,
            rest_windows: 0,
        });
        st.started = t0;
        let young = || t0 + Duration::from_millis(49);
        let old = || t0 + Duration::from_millis(50);
        // Younger than its age limit: no decision, however many requests.
        assert_eq!(feed_at(&mut st, 0, &[(2, 5000)], young), None);
        // Old: the next request on a clock tick closes it, and it moves.
        let mut moved = None;
        for i in 1..=CLOCK_EVERY {
            moved = st.count(2, 0, |_| true, old);
            if moved.is_some() {
                assert_eq!((st.seen, (5000 + i) % CLOCK_EVERY), (0, 0), "closed off a clock tick");
                break;
            }
        }
        assert_eq!(moved, Some(2));
        // The next window starts at the close: young again.
        let mut st2 = st;
        st2.started = t0;
        // Old, but with fewer than MIN_WINDOW requests: it stays open.
        assert_eq!(feed_at(&mut st2, 0, &[(2, MIN_WINDOW - 1)], old), None);
        assert_eq!(st2.seen, MIN_WINDOW - 1);
        // With 0, only the count closes a window.
        retune(&st2, |p| p.window_ms = 0);
        assert_eq!(feed_at(&mut st2, 0, &[(2, 10_000)], || t0 + Duration::from_secs(3600)), None);
    }

    #[test]
    fn a_window_closed_by_its_count_restarts_the_clock() {
        let t0 = Instant::now();
        let mut st = state(100);
        retune(&st, |p| p.window_ms = 50);
        st.started = t0;
        let later = || t0 + Duration::from_millis(40);
        assert_eq!(feed_at(&mut st, 0, &[(1, 100)], later), Some(1));
        assert_eq!(st.started, later(), "a new window starts when the last one closed");
    }

    #[test]
    fn parameters_out_of_bounds_are_refused() {
        let ok = FollowParams::default();
        assert!(ok.check().is_ok());
        assert!(FollowParams { window: 1, ..ok }.check().is_err());
        assert!(FollowParams { share_percent: 50, ..ok }.check().is_err());
        assert!(FollowParams { return_percent: 59, ..ok }.check().is_err());
        assert!(FollowParams { rest_windows: 1 << 17, ..ok }.check().is_err());
        assert!(FollowParams { window_ms: 60_001, ..ok }.check().is_err());
        assert!(FollowParams { window_ms: 0, ..ok }.check().is_ok());
    }
}
