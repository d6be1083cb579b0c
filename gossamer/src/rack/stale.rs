//! What a program killed while it started leaves behind, and its removal.
//!
//! A program of several processes names two things while it starts: rank
//! 0's rendezvous socket (`gossamer-PID-NONCE.sock` in the temporary
//! directory, see `rack::launch`) and each host's region
//! (`/dev/shm/gossamer-PID-NONCE-hH`, see `rack::bootstrap`). Each name is
//! removed as soon as every process has connected or mapped (the memory
//! stays mapped), and on every way out of the start-up, so a program that
//! ends in any way leaves neither. A process killed inside that window
//! (`SIGKILL`, the OOM killer) leaves them: a socket file, and a region
//! that holds its memory until the machine restarts.
//!
//! Every rank of a later program removes such leftovers as it starts. A
//! name older than four times the start-up deadline cannot belong to a
//! program still starting: a start-up's waits (every rank's arrival, the
//! hosts' first processes mapping, then the others) each give up after
//! the deadline, so a name lives at most about three deadlines, and a
//! program that has started has removed its names. Only this user's files
//! are touched, and only names of exactly these two shapes.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Removes this user's leftovers (see the module docs) older than `age`
/// from the usual places; returns how many it removed.
pub(crate) fn sweep(age: Duration) -> usize {
    let Ok(me) = std::fs::metadata("/proc/self").map(|m| m.uid()) else {
        return 0; // no way to tell our files from others'
    };
    let now = SystemTime::now();
    sweep_dir(Path::new("/dev/shm"), Kind::Region, me, age, now)
        + sweep_dir(&std::env::temp_dir(), Kind::Socket, me, age, now)
}

/// Which leftover a directory may hold.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// `gossamer-PID-NONCE-hH`, a shared memory object.
    Region,
    /// `gossamer-PID-NONCE.sock`, a Unix socket.
    Socket,
}

fn sweep_dir(dir: &Path, kind: Kind, uid: u32, age: Duration, now: SystemTime) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        if name.to_str().and_then(shape) != Some(kind) {
            continue;
        }
        let Ok(m) = e.metadata() else { continue };
        let right_type = match kind {
            Kind::Region => m.file_type().is_file(),
            Kind::Socket => m.file_type().is_socket(),
        };
        let old = m.modified().ok().and_then(|t| now.duration_since(t).ok()).is_some_and(|d| d > age);
        if right_type && m.uid() == uid && old && std::fs::remove_file(e.path()).is_ok() {
            tracing::info!(path = %e.path().display(), "removed what a program killed while starting left behind");
            removed += 1;
        }
    }
    removed
}

/// The kind of leftover `name` is, if it has one of the two shapes.
fn shape(name: &str) -> Option<Kind> {
    let rest = name.strip_prefix("gossamer-")?;
    let (pid, rest) = rest.split_once('-')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let nonce = rest.get(..8)?;
    if !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    match rest.get(8..)? {
        ".sock" => Some(Kind::Socket),
        h => {
            let host = h.strip_prefix("-h")?;
            (!host.is_empty() && host.bytes().all(|b| b.is_ascii_digit())).then_some(Kind::Region)
        }
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn only_the_two_shapes_are_leftovers() {
        assert_eq!(shape("gossamer-123-00ab12ef.sock"), Some(Kind::Socket));
        assert_eq!(shape("gossamer-123-00ab12ef-h0"), Some(Kind::Region));
        assert_eq!(shape("gossamer-123-00ab12ef-h17"), Some(Kind::Region));
        for other in [
            "gossamer-123-00ab12e.sock",
            "gossamer-123-00ab12eg.sock",
            "gossamer-12a-00ab12ef.sock",
            "gossamer--00ab12ef.sock",
            "gossamer-123-00ab12ef-h",
            "gossamer-123-00ab12ef-hx",
            "gossamer-123-00ab12ef.sock.bak",
            "gossamer-123-00ab12ef",
            "gossamer-slurm-123",
            "gossamer-kv.sock",
            "other-123-00ab12ef-h0",
        ] {
            assert_eq!(shape(other), None, "{other}");
        }
    }

    /// A directory of its own under the temporary directory, removed when
    /// dropped.
    struct Dir(std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn old_leftovers_of_this_user_go_and_everything_else_stays() {
        let dir = Dir(std::env::temp_dir().join(format!("gossamer-stale-test-{}", std::process::id())));
        std::fs::create_dir_all(&dir.0).unwrap();
        let me = std::fs::metadata("/proc/self").unwrap().uid();
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        let make = |name: &str, old: bool| {
            let f = File::create(dir.0.join(name)).unwrap();
            if old {
                f.set_modified(hour_ago).unwrap();
            }
        };
        make("gossamer-41-0000beef-h0", true); // a region left an hour ago
        make("gossamer-42-0000beef-h1", false); // a region of a program starting now
        make("gossamer-43-0000beef-h", true); // not our shape
        make("gossamer-44-0000beef.sock", true); // a plain file, not a socket
        let now = SystemTime::now();
        let age = Duration::from_secs(120);
        assert_eq!(sweep_dir(&dir.0, Kind::Region, me.wrapping_add(1), age, now), 0, "another user's files stay");
        assert_eq!(sweep_dir(&dir.0, Kind::Region, me, age, now), 1);
        let left: std::collections::BTreeSet<String> =
            std::fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        let expect = ["gossamer-42-0000beef-h1", "gossamer-43-0000beef-h", "gossamer-44-0000beef.sock"];
        assert_eq!(left, expect.iter().map(|s| s.to_string()).collect());

        // Sockets: an old one goes, a fresh one stays.
        let old_sock = dir.0.join("gossamer-45-0000beef.sock");
        let new_sock = dir.0.join("gossamer-46-0000beef.sock");
        drop(std::os::unix::net::UnixListener::bind(&old_sock).unwrap());
        drop(std::os::unix::net::UnixListener::bind(&new_sock).unwrap());
        let later = SystemTime::now() + Duration::from_secs(60);
        assert_eq!(sweep_dir(&dir.0, Kind::Socket, me, Duration::from_secs(30), later), 2, "both are 60 s old then");
        drop(std::os::unix::net::UnixListener::bind(&old_sock).unwrap());
        assert_eq!(sweep_dir(&dir.0, Kind::Socket, me, age, SystemTime::now()), 0, "a fresh socket stays");
        assert!(old_sock.exists());
    }
}
