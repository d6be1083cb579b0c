//! `SharedBytes` between the processes of one host, started as real
//! processes (this test binary re-runs itself with `GOSSAMER_SCENARIO`):
//! buffers cross by reference and come back as the same block, blocks freed
//! by another process or by a thread outside the runtime return to their
//! owner's arena, and a buffer sent inside a larger value crosses as a copy
//! while its sender keeps its bytes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gossamer::SharedBytes;

mod common;
use common::programs::{self, run_program};

// ---- the scenarios (run inside the spawned processes) ----------------------

/// Thread 2 is the first thread of the second process (3 processes × 2).
const FAR: usize = 2;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn by_reference() {
    assert_eq!(gossamer::topology().processes.len(), 3);
    let far = gossamer::entrust_on(FAR, 0u64);
    for (k, len) in [0usize, 1, 64, 1000, 4096, 100_000, 1 << 20].into_iter().enumerate() {
        let want = pattern(k as u64 + 7, len);
        let b = SharedBytes::from(&want[..]);
        let home = b.home_thread();
        assert!(home.is_some_and(|t| t < FAR), "made on a worker of this process: in its arena of the shared heap");
        // The trustee in the other process reads the bytes in place, changes
        // the first one, and answers with them, with where they live, and
        // with a buffer of its own.
        let (back, (theirs, seen_home, sum)) = far.apply_with(
            |n, mut p: SharedBytes| {
                *n += 1;
                let sum: u64 = p.iter().map(|&b| u64::from(b)).sum();
                if let Some(first) = p.first_mut() {
                    *first = first.wrapping_add(1);
                }
                let theirs = SharedBytes::from(&p[..p.len().min(8)]);
                let home = p.home_thread();
                (p, (theirs, home, sum))
            },
            b,
        );
        // A copy would have landed in the trustee's own arena, and its
        // answer in ours.
        assert_eq!(seen_home, home, "the trustee read our block in place ({len} bytes)");
        assert_eq!(theirs.home_thread(), Some(FAR), "its buffer came back by reference ({len} bytes)");
        // Inside the answer's tuple, the buffer comes back as a copy in the
        // trustee's arena (serde serializes it by reference).
        assert_eq!(back.home_thread(), Some(FAR));
        assert_eq!(sum, want.iter().map(|&b| u64::from(b)).sum::<u64>(), "the trustee read the bytes ({len})");
        let mut expect = want.clone();
        if let Some(first) = expect.first_mut() {
            *first = first.wrapping_add(1);
        }
        assert_eq!(&back[..], &expect[..], "the change came back ({len} bytes)");
        assert_eq!(&theirs[..], &expect[..len.min(8)]);
        // Sent and answered on its own, the very block goes there and back.
        let at = back.as_ptr();
        let again = far.apply_with(
            |_, mut p: SharedBytes| {
                if let Some(last) = p.last_mut() {
                    *last = last.wrapping_add(1);
                }
                p
            },
            back,
        );
        assert_eq!(again.as_ptr(), at, "the same block came back ({len} bytes)");
        if let Some(last) = expect.last_mut() {
            *last = last.wrapping_add(1);
        }
        assert_eq!(&again[..], &expect[..]);
    }
    // Inside a larger value, and as a `spawn_with` argument and result.
    let parts = vec![SharedBytes::from(&b"one"[..]), SharedBytes::from(&b"two"[..])];
    let joined = gossamer::spawn_with(
        FAR,
        |(tag, parts): (u32, Vec<SharedBytes>)| {
            let mut all = tag.to_le_bytes().to_vec();
            for p in &parts {
                all.extend_from_slice(p);
            }
            (SharedBytes::from(all), parts.into_iter().all(|p| p.home_thread().is_some_and(|t| t < FAR)))
        },
        (9, parts),
    )
    .join()
    .unwrap();
    assert!(joined.1 && joined.0.home_thread() == Some(FAR));
    assert_eq!(&joined.0[..], b"\x09\0\0\0onetwo");
    println!("SCENARIO by_reference ok");
}

fn freed_elsewhere() {
    // Each thread's arena is small here (`GOSSAMER_BULK_BYTES`): 100 rounds
    // of 32 blocks of 4 KiB kept and then freed by another process fit only
    // if the freed blocks come back.
    let store = gossamer::entrust_on(FAR, Vec::<SharedBytes>::new());
    let mut checksum = 0u64;
    for round in 0..100u64 {
        for k in 0..32u64 {
            let b = SharedBytes::from(&pattern(round * 32 + k, 4096)[..]);
            assert!(
                b.home_thread().is_some_and(|t| t < FAR),
                "round {round}: the arena ran out: freed blocks did not come back"
            );
            checksum += u64::from(b[0]);
            let kept_there = store.apply_with(
                |s, b: SharedBytes| {
                    let home = b.home_thread();
                    s.push(b);
                    home
                },
                b,
            );
            assert!(kept_there.is_some_and(|t| t < FAR), "the other process keeps our block itself");
        }
        let sum = store.apply_with(
            |s, ()| {
                let sum = s.iter().map(|b| u64::from(b[0])).sum::<u64>();
                s.clear();
                sum
            },
            (),
        );
        assert_eq!(sum, (0..32).map(|k| u64::from(pattern(round * 32 + k, 1)[0])).sum::<u64>());
    }
    assert!(checksum > 0);
    println!("SCENARIO freed_elsewhere ok");
}

fn freed_off_the_runtime() {
    // Small arenas again (`GOSSAMER_BULK_BYTES`): 100 rounds of 32 blocks of
    // 4 KiB from this thread's arena and 32 from the other process's, all
    // dropped on a thread of the program's own that is not a worker, fit
    // only if a worker takes those blocks back and hands the other
    // process's on to their owner.
    let far = gossamer::entrust_on(FAR, 0u64);
    for round in 0..100u64 {
        let mut doomed = Vec::new();
        for k in 0..32u64 {
            let b = SharedBytes::from(&pattern(round * 32 + k, 4096)[..]);
            assert!(b.home_thread().is_some_and(|t| t < FAR), "round {round}: our arena ran out");
            let theirs = far.apply_with(|_, n: u64| SharedBytes::from(&pattern(n, 4096)[..]), round * 32 + k);
            assert!(
                theirs.home_thread().is_some_and(|t| t >= FAR),
                "round {round}: the other process's arena ran out: blocks freed here did not go back"
            );
            assert_eq!(&theirs[..], &pattern(round * 32 + k, 4096)[..]);
            doomed.push(b);
            doomed.push(theirs);
        }
        std::thread::spawn(move || drop(doomed)).join().unwrap();
    }
    println!("SCENARIO freed_off_the_runtime ok");
}

/// A value whose serialization always fails.
struct Unsendable;

impl gossamer::serde::Serialize for Unsendable {
    fn serialize<S: gossamer::serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(gossamer::serde::ser::Error::custom("this value never crosses"))
    }
}

impl<'de> gossamer::serde::Deserialize<'de> for Unsendable {
    fn deserialize<D: gossamer::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <() as gossamer::serde::Deserialize>::deserialize(d).map(|()| Unsendable)
    }
}

fn kept_by_the_sender() {
    // Inside a larger value a buffer is serialized by reference: the sender
    // keeps its bytes, and a copy in our arena of the shared heap crosses.
    let far = gossamer::entrust_on(FAR, 0u64);
    let kept = Arc::new(Mutex::new(SharedBytes::from(&b"stays here"[..])));
    let (got, home) = far.apply_with(
        |_, m: Arc<Mutex<SharedBytes>>| {
            let b = m.lock().unwrap();
            (b.to_vec(), b.home_thread())
        },
        kept.clone(),
    );
    assert_eq!(got, b"stays here");
    assert!(home.is_some_and(|t| t < FAR), "the copy that crossed is a block of our arena: {home:?}");
    assert_eq!(&kept.lock().unwrap()[..], b"stays here", "the sender's buffer keeps its bytes");
    // Many times over, with small arenas: the copies come back too.
    for round in 0..2000u32 {
        let (n, home) = far.apply_with(
            |_, (m, k): (Arc<Mutex<SharedBytes>>, u32)| {
                let b = m.lock().unwrap();
                (u32::from(b[0]) + k, b.home_thread())
            },
            (kept.clone(), round),
        );
        assert_eq!(n, u32::from(b's') + round);
        assert!(home.is_some_and(|t| t < FAR), "round {round}: the copies did not come back");
    }
    assert_eq!(&kept.lock().unwrap()[..], b"stays here");
    // A message that fails to serialize after its copy was made gives the
    // copy back: 200 of them would fill the arena otherwise.
    let page = Arc::new(Mutex::new(SharedBytes::from(&[5u8; 4096][..])));
    for round in 0..200 {
        let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            far.apply_with(|_, _: (Arc<Mutex<SharedBytes>>, Unsendable)| (), (page.clone(), Unsendable))
        }));
        assert!(sent.is_err(), "a value that cannot be serialized was sent");
        let probe = SharedBytes::zeroed(4096);
        assert!(probe.home_thread().is_some_and(|t| t < FAR), "round {round}: the failed messages' copies leaked");
    }
    println!("SCENARIO kept_by_the_sender ok");
}

#[test]
fn scenario_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SCENARIO") else { return };
    let f: fn() = match s.as_str() {
        "by_reference" => by_reference,
        "freed_elsewhere" => freed_elsewhere,
        "freed_off_the_runtime" => freed_off_the_runtime,
        "kept_by_the_sender" => kept_by_the_sender,
        other => panic!("unknown scenario {other}"),
    };
    gossamer::main(f, 6);
    common::assert_no_thread_left("rank 0");
}

// ---- the tests (run the scenarios as programs) ------------------------------

fn expect_ok(name: &str, env: &[(&str, &str)]) {
    let mut cmd = programs::scenario(name, 3);
    cmd.envs(env.iter().copied());
    let (out, _) = run_program(cmd, Duration::from_secs(120));
    programs::passed(&out, name);
}

#[test]
fn shared_bytes_cross_processes_of_a_host_by_reference_and_come_back_as_the_same_block() {
    expect_ok("by_reference", &[]);
}

#[test]
fn blocks_freed_by_another_process_return_to_their_arena() {
    expect_ok("freed_elsewhere", &[("GOSSAMER_BULK_BYTES", "262144")]);
}

#[test]
fn blocks_freed_outside_the_runtime_return_to_their_arena() {
    expect_ok("freed_off_the_runtime", &[("GOSSAMER_BULK_BYTES", "262144")]);
}

#[test]
fn a_shared_buffer_inside_a_larger_value_crosses_as_a_copy_and_the_sender_keeps_its_bytes() {
    expect_ok("kept_by_the_sender", &[("GOSSAMER_BULK_BYTES", "262144")]);
}
