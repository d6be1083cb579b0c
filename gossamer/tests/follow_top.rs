//! The `Follow` migration policy from `gossamer top`: the socket lists each
//! property that follows its requests (holder, on or off, moves,
//! parameters), pauses it, resumes it and retunes it while the program
//! runs; a refused change changes nothing; a property set back to `Stay`,
//! or dropped, leaves the list. One test: a process serves one socket.

mod common;
use common::top::Top;
use common::{within, yield_until};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gossamer::{FollowParams, MigrationPolicy, Runtime, Trust};

/// Counts its drops.
struct Counter {
    n: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Counter {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// `n` increments from a fiber on `thread`; the trustee that ran the last.
fn drive(t: &Trust<Counter>, thread: usize, n: u64) -> usize {
    let t = t.clone();
    gossamer::spawn_on(thread, move || {
        for _ in 0..n {
            t.apply(|c| c.n += 1);
        }
        t.apply(|_| gossamer::current_thread().expect("a closure runs on a worker"))
    })
    .join()
    .unwrap()
}

/// Drives the property from `thread`, 1000 increments at a time, until it
/// runs there (bounded by `within`); the increments made. A move is asked
/// for by the holder and run by the origin's thread, which on a loaded
/// machine may not run for a while: the requests meanwhile are served
/// where the value is.
fn drive_until_there(t: &Trust<Counter>, thread: usize) -> u64 {
    let mut n = 1000;
    while drive(t, thread, 1000) != thread {
        n += 1000;
    }
    n
}

/// The `follow` answer's line for `id`, if any, and checks the answer ends.
fn row(top: &mut Top, id: u64) -> Option<String> {
    let all = top.ask(b"follow", true);
    assert!(all.ends_with("end\n"), "{all}");
    all.lines().find(|l| l.starts_with(&format!("follow {id:x} "))).map(str::to_string)
}

#[test]
fn top_lists_pauses_resumes_and_retunes_a_property_that_follows() {
    within(180, || {
        let rt = Runtime::builder().workers(3).top_socket(true).build().unwrap();
        let mut top = Top::connect(&rt);
        assert_eq!(top.ask(b"follow", true), "end\n", "nothing follows yet");
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        let total = rt.block_on(move || {
            let t = gossamer::trustee(0).entrust(Counter { n: 0, drops: d.clone() });
            let still = gossamer::trustee(0).entrust(Counter { n: 0, drops: d });
            let id = t.profile_id().0;
            let params =
                FollowParams { window: 64, window_ms: 0, share_percent: 60, return_percent: 80, rest_windows: 0 };
            t.set_migration_policy(MigrationPolicy::Follow(params)).unwrap();
            let params_text = "window=64 window_ms=0 share_percent=60 return_percent=80 rest_windows=0";
            assert_eq!(row(&mut top, id), Some(format!("follow {id:x} 0 on 0 {params_text}")));

            // Used from thread 1 only: it moves there, and the row says so.
            let mut total = drive_until_there(&t, 1);
            assert_eq!(row(&mut top, id), Some(format!("follow {id:x} 1 on 1 {params_text}")));

            // Paused, it stays put however its requests come.
            assert_eq!(top.ask(format!("follow {id:x} off").as_bytes(), false), "ok\n");
            assert_eq!(row(&mut top, id), Some(format!("follow {id:x} 1 off 1 {params_text}")));
            assert_eq!(drive(&t, 2, 3000), 1, "a paused property moved");
            total += 3000;

            // Refused changes change nothing: out of bounds, a return share
            // below the new share, an id that does not follow, one of no
            // property, a malformed command.
            let still_id = still.profile_id().0;
            for (cmd, why) in [
                (format!("follow {id:x} on window=8"), "window = 8 is out of bounds"),
                (format!("follow {id:x} share_percent=90"), "return_percent"),
                (format!("follow {id:x} rest_windows=99999999999"), "rest_windows = 99999999999"),
                (format!("follow {still_id:x} on"), "follows its requests"),
                ("follow 1 on".to_string(), "no property 0x1"),
                (format!("follow {id:x} sideways"), "not on, off or key=value"),
            ] {
                let a = top.ask(cmd.as_bytes(), false);
                assert!(a.starts_with("error ") && a.contains(why), "{cmd}: {a}");
            }
            assert_eq!(row(&mut top, id), Some(format!("follow {id:x} 1 off 1 {params_text}")));
            assert_eq!(row(&mut top, still_id), None);

            // Resumed with new parameters: it follows thread 2 now.
            let cmd = format!("follow 0x{id:x} on window=32 share_percent=90 return_percent=95");
            assert_eq!(top.ask(cmd.as_bytes(), false), "ok\n");
            let retuned = "window=32 window_ms=0 share_percent=90 return_percent=95 rest_windows=0";
            assert_eq!(row(&mut top, id), Some(format!("follow {id:x} 1 on 1 {retuned}")));
            total += drive_until_there(&t, 2);
            assert_eq!(row(&mut top, id), Some(format!("follow {id:x} 2 on 2 {retuned}")));

            // The program's own setting wins over what top set: back to
            // its parameters, on.
            t.set_migration_policy(MigrationPolicy::Follow(params)).unwrap();
            assert_eq!(row(&mut top, id), Some(format!("follow {id:x} 2 on 2 {params_text}")));

            // Stay: no longer listed, and no longer moves.
            t.set_migration_policy(MigrationPolicy::Stay).unwrap();
            assert_eq!(row(&mut top, id), None);
            assert_eq!(drive(&t, 1, 1000), 2);
            total += 1000;
            let a = top.ask(format!("follow {id:x} on").as_bytes(), false);
            assert!(a.starts_with("error "), "{a}");

            // Following again, then dropped: gone from the list once its
            // value is.
            t.set_migration_policy(MigrationPolicy::Follow(params)).unwrap();
            assert_eq!(row(&mut top, id), Some(format!("follow {id:x} 2 on 0 {params_text}")));
            assert_eq!(t.apply(|c| c.n), total, "every increment ran once");
            drop((t, still));
            let top = std::cell::RefCell::new(top);
            let gone = || top.borrow_mut().ask(b"follow", true) == "end\n";
            assert!(yield_until(Duration::from_secs(30), gone), "still listed after its value was dropped");
            total
        });
        assert!(total >= 6000);
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 2, "each value dropped once");
    });
}
