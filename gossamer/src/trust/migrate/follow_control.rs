//! The live settings of a property that follows its requests, and the
//! registry through which `gossamer top` lists and changes them
//! (`runtime::top_follow`).
//!
//! The follow state (`follow::State`) lives in the cell that holds the
//! value and is touched only on that cell's thread. What another thread
//! may read or change of it sits apart, in a [`Control`] the state shares
//! with the registry: the parameters and an on/off switch in two words the
//! holder reads once per request it counts, and the holder's index and
//! the number of moves, which the thread the value leaves writes as it
//! moves. Every combination of the two words is a valid setting (each
//! bound that ties two parameters together, `return_percent` ≥
//! `share_percent`, is checked within one word), so a reader never needs a
//! lock, and a change made from `gossamer top` takes effect at the next
//! request.
//!
//! A state enters the registry when the property is given the policy and
//! leaves it when the state is dropped: the policy set back to `Stay`, or
//! the value dropped with its cell. A new property may take the address of
//! one whose state is still on its way to being dropped; the entry is then
//! replaced, and the old state's drop leaves the new entry alone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::follow::FollowParams;
use crate::runtime::top_follow::{self, FollowChange, FollowRow};

/// What `gossamer top` reads and changes of one property that follows.
pub(crate) struct Control {
    /// The runtime the property belongs to.
    runtime: u64,
    /// Its profile id (its origin cell's address).
    id: usize,
    /// `window` (low 32 bits) and `window_ms` (high 32 bits).
    sizes: AtomicU64,
    /// `share_percent` (bits 0–7), `return_percent` (bits 8–15), off (bit
    /// 16) and `rest_windows` (high 32 bits).
    rules: AtomicU64,
    /// The trustee that holds the value.
    holder: AtomicUsize,
    /// Moves since the property was given the policy.
    moves: AtomicU64,
}

const OFF: u64 = 1 << 16;

impl Control {
    /// The settings of a property of runtime `runtime` with profile id
    /// `id`, held by `holder`, following with `params`.
    pub(crate) fn new(runtime: u64, id: usize, holder: usize, params: FollowParams) -> Control {
        let c = Control {
            runtime,
            id,
            sizes: AtomicU64::new(0),
            rules: AtomicU64::new(0),
            holder: AtomicUsize::new(holder),
            moves: AtomicU64::new(0),
        };
        c.set(params, true);
        c
    }

    /// The parameters now, and whether the property follows.
    pub(crate) fn get(&self) -> (FollowParams, bool) {
        let sizes = self.sizes.load(Ordering::Relaxed);
        let rules = self.rules.load(Ordering::Relaxed);
        let params = FollowParams {
            window: sizes as u32,
            window_ms: (sizes >> 32) as u32,
            share_percent: rules as u8,
            return_percent: (rules >> 8) as u8,
            rest_windows: (rules >> 32) as u32,
        };
        (params, rules & OFF == 0)
    }

    /// Sets the parameters (checked by the caller) and the switch.
    pub(crate) fn set(&self, p: FollowParams, on: bool) {
        let sizes = u64::from(p.window) | u64::from(p.window_ms) << 32;
        let rules = u64::from(p.share_percent)
            | u64::from(p.return_percent) << 8
            | if on { 0 } else { OFF }
            | u64::from(p.rest_windows) << 32;
        self.sizes.store(sizes, Ordering::Relaxed);
        self.rules.store(rules, Ordering::Relaxed);
    }

    /// The property moved to trustee `to` (by the thread it left: one
    /// writer at a time, each move ordered after the last by the move's
    /// own messages).
    pub(crate) fn moved_to(&self, to: usize) {
        self.holder.store(to, Ordering::Relaxed);
        self.moves.store(self.moves.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    fn row(&self) -> FollowRow {
        let (p, on) = self.get();
        FollowRow {
            id: self.id as u64,
            holder: self.holder.load(Ordering::Relaxed),
            on,
            moves: self.moves.load(Ordering::Relaxed),
            params: [
                p.window.into(),
                p.window_ms.into(),
                p.share_percent.into(),
                p.return_percent.into(),
                p.rest_windows.into(),
            ],
        }
    }
}

/// Profile id to the settings of a live property that follows.
static REGISTRY: Mutex<Option<HashMap<usize, Arc<Control>>>> = Mutex::new(None);

/// Lists `c` (its property was given the policy).
pub(crate) fn register(c: &Arc<Control>) {
    let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let r = r.get_or_insert_with(|| {
        let _ = top_follow::HOOKS.set(top_follow::Hooks { list, change });
        HashMap::new()
    });
    r.insert(c.id, c.clone());
}

/// Forgets `c`, if it is still the entry for its id.
pub(crate) fn unregister(c: &Arc<Control>) {
    let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = r.as_mut() {
        if r.get(&c.id).is_some_and(|e| Arc::ptr_eq(e, c)) {
            r.remove(&c.id);
        }
    }
}

fn list(runtime: u64) -> Vec<FollowRow> {
    let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    r.as_ref().map_or_else(Vec::new, |r| r.values().filter(|c| c.runtime == runtime).map(|c| c.row()).collect())
}

/// `params` with `change` applied and checked; why not, naming the value
/// given.
pub(crate) fn apply(params: FollowParams, change: &FollowChange) -> Result<FollowParams, String> {
    let mut p = params;
    for &(key, v) in &change.params {
        let name = top_follow::KEYS.get(key).copied().unwrap_or("?");
        // Out of the field's range: out of every bound too, so the check
        // below refuses it; it names the value given, not the one kept.
        let wide = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        let narrow = |v: u64| u8::try_from(v).unwrap_or(u8::MAX);
        match key {
            0 => p.window = wide(v),
            1 => p.window_ms = wide(v),
            2 => p.share_percent = narrow(v),
            3 => p.return_percent = narrow(v),
            4 => p.rest_windows = wide(v),
            _ => return Err(format!("unknown parameter {name}")),
        }
        if let Err(crate::Error::BadMigrationParam { name: bad, allowed, .. }) = p.check() {
            if bad == name {
                return Err(format!("{name} = {v} is out of bounds: it must be {allowed}"));
            }
        }
    }
    p.check().map_err(|e| e.to_string())?;
    Ok(p)
}

fn change(runtime: u64, id: u64, change: &FollowChange) -> Result<(), String> {
    let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let c = usize::try_from(id)
        .ok()
        .and_then(|id| r.as_ref()?.get(&id))
        .filter(|c| c.runtime == runtime)
        .ok_or_else(|| format!("no property {id:#x} follows its requests in this program (see `follow`)"))?;
    let (params, on) = c.get();
    let params = apply(params, change)?;
    c.set(params, change.on.unwrap_or(on));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_survives_the_two_words() {
        let p = FollowParams {
            window: 1 << 20,
            window_ms: 60_000,
            share_percent: 51,
            return_percent: 100,
            rest_windows: 1 << 16,
        };
        let c = Control::new(1, 2, 3, p);
        assert_eq!(c.get(), (p, true));
        c.set(FollowParams::default(), false);
        assert_eq!(c.get(), (FollowParams::default(), false));
        c.moved_to(5);
        c.moved_to(4);
        let row = c.row();
        assert_eq!((row.holder, row.moves, row.on), (4, 2, false));
        assert_eq!(row.params, [1024, 100, 60, 80, 4]);
    }

    #[test]
    fn changes_are_checked_with_the_other_parameters() {
        let d = FollowParams::default();
        let ch = |params: Vec<(usize, u64)>| FollowChange { on: None, params };
        assert_eq!(apply(d, &ch(vec![(0, 64), (4, 0)])).unwrap(), FollowParams { window: 64, rest_windows: 0, ..d });
        // return_percent below the new share_percent.
        assert!(apply(d, &ch(vec![(2, 90)])).unwrap_err().contains("return_percent"));
        assert!(apply(d, &ch(vec![(2, 90), (3, 95)])).is_ok());
        let e = apply(d, &ch(vec![(0, 1 << 40)])).unwrap_err();
        assert!(e.contains("window = 1099511627776") && e.contains("16 to 1048576"), "{e}");
        let e = apply(d, &ch(vec![(2, 300)])).unwrap_err();
        assert!(e.contains("share_percent = 300"), "{e}");
        assert!(apply(d, &ch(vec![(5, 1)])).is_err());
    }
}
