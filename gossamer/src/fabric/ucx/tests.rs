//! Tests of the UCX binding against the installed library: loading and its
//! error, puts between two workers of one process (one thread, and two),
//! misuse, and a lost peer. Without UCX they print a loud SKIPPED line and
//! pass, unless `GOSSAMER_REQUIRE_UCX=1` (CI) makes them fail.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::ffi;
use super::{Context, Endpoint, IoPart, Put, Ucx, UcxError, Worker};

/// Bound on every wait of these tests.
const WAIT: Duration = Duration::from_secs(20);

pub(super) fn ucx_required() -> bool {
    std::env::var("GOSSAMER_REQUIRE_UCX").is_ok_and(|v| v == "1")
}

/// Skips (or fails, when required) a test that needs UCX. The line goes
/// straight to the process's stderr, past the test harness's capture.
pub(super) fn skip(test: &str, why: &str) {
    assert!(!ucx_required(), "{test}: UCX is required (GOSSAMER_REQUIRE_UCX=1) but {why}");
    let line = format!(
        "SKIPPED gossamer::fabric::ucx::{test}: {why}; \
         set GOSSAMER_REQUIRE_UCX=1 to fail instead\n"
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}

fn ucx_or_skip(test: &str) -> Option<Arc<Ucx>> {
    match Ucx::load() {
        Ok(ucx) => Some(ucx),
        Err(e) => {
            skip(test, &e.to_string());
            None
        }
    }
}

/// Memory a peer writes into: allocated here, only ever accessed through
/// its raw pointer.
struct Target {
    ptr: *mut u8,
    len: usize,
}

impl Target {
    fn new(len: usize) -> Target {
        let ptr = Box::into_raw(vec![0u8; len].into_boxed_slice()).cast::<u8>();
        Target { ptr, len }
    }

    /// A copy of the contents; only while no put into it is under way.
    fn snapshot(&self) -> Vec<u8> {
        // SAFETY: ptr/len is our live allocation; the callers make sure no
        // UCX write is in progress (all puts flushed, or the writer stopped).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }.to_vec()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        // SAFETY: allocated in new() as a boxed slice of len bytes.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

// SAFETY: a plain allocation; the tests synchronize access (thread join).
unsafe impl Send for Target {}
// SAFETY: as for Send.
unsafe impl Sync for Target {}

/// Progresses every worker until `done`, for at most WAIT; returns the
/// number of events progress reported.
fn drive(workers: &[&Worker], what: &str, mut done: impl FnMut() -> Result<bool, UcxError>) -> u64 {
    let start = Instant::now();
    let mut events = 0u64;
    loop {
        if done().unwrap_or_else(|e| panic!("{what}: {e}")) {
            return events;
        }
        assert!(start.elapsed() < WAIT, "{what}: not done within {WAIT:?}");
        let mut n = 0;
        for w in workers {
            n += u64::from(w.progress());
        }
        events += n;
        if n == 0 {
            std::thread::yield_now();
        }
    }
}

/// Compares two images and names the first difference.
fn assert_same(what: &str, got: &[u8], want: &[u8]) {
    assert_eq!(got.len(), want.len());
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        let n = got.iter().zip(want).filter(|(g, w)| g != w).count();
        panic!("{what}: {n} bytes differ, the first at offset {i}: got {:#04x}, want {:#04x}", got[i], want[i]);
    }
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

/// Closes endpoints (by dropping them) and progresses both workers until
/// the closes are done.
fn close_all(a: &Worker, b: &Worker, eps: Vec<Endpoint>) {
    drop(eps);
    drive(&[a, b], "closing the endpoints", || Ok(a.pending_closes() == 0 && b.pending_closes() == 0));
}

fn loopback(test: &str, tls: Option<&str>) {
    let Some(ucx) = ucx_or_skip(test) else { return };
    let ctx = Context::new(&ucx, tls, false).unwrap();
    let a = Worker::new(&ctx).unwrap();
    let b = Worker::new(&ctx).unwrap();
    let a_addr = a.address().unwrap();
    let b_addr = b.address().unwrap();
    assert!(!a_addr.is_empty() && a_addr != b_addr);
    let ab = a.connect(&b_addr).unwrap();
    let ba = b.connect(&a_addr).unwrap();

    // b's region: 2 MiB; a's region (for the way back): 64 KiB.
    const MIB: usize = 1 << 20;
    let b_mem = Target::new(2 * MIB);
    let a_mem = Target::new(64 << 10);
    // SAFETY: the targets outlive the regions and every put (all flushed
    // before they go), and are only read through raw pointers after flushes.
    let b_region = unsafe { ctx.mem_map(b_mem.ptr, b_mem.len) }.unwrap();
    // SAFETY: as above.
    let a_region = unsafe { ctx.mem_map(a_mem.ptr, a_mem.len) }.unwrap();
    let b_packed = b_region.pack_rkey().unwrap();
    assert!(!b_packed.is_empty());
    let b_key = ab.unpack_rkey(&a, &b_packed, b_region.base(), b_region.len()).unwrap();
    let a_key = ba.unpack_rkey(&b, &a_region.pack_rkey().unwrap(), a_region.base(), a_region.len()).unwrap();
    assert_eq!((b_key.base(), b_key.len()), (b_mem.ptr as u64, 2 * MIB));

    let mut want = vec![0u8; 2 * MIB];
    let base = b_region.base();

    // One large put, then a flush: the bytes must be there.
    let big = pattern(MIB, 7);
    let big_at = 4096;
    let start = Instant::now();
    let mut events = 0;
    {
        let mut put = ab.put(&a, &big, base + big_at as u64, &b_key).unwrap();
        events += drive(&[&a, &b], "1 MiB put", || a.is_done(&mut put));
        let mut flush = a.flush_nb().unwrap();
        events += drive(&[&a, &b], "worker flush", || a.is_done(&mut flush));
    }
    let big_time = start.elapsed();
    want[big_at..big_at + MIB].copy_from_slice(&big);
    assert_same("after the 1 MiB put", &b_mem.snapshot(), &want);
    assert!(events > 0, "progress reported no event while a 1 MiB put went through");

    // Small puts at various offsets (both ends of the region, straddling
    // the large one's edges), then two puts to the same bytes with a fence
    // between them: the second must win.
    let smalls: Vec<(usize, Vec<u8>)> = vec![
        (0, vec![0xa5]),
        (1, b"hello".to_vec()),
        (big_at - 2, vec![1, 2, 3, 4]),
        (big_at + MIB - 3, pattern(7, 99)),
        (12_345, pattern(100, 3)),
        (2 * MIB - 8, 0xdead_beef_cafe_f00d_u64.to_le_bytes().to_vec()),
    ];
    let first = [1u8; 16];
    let second = [2u8; 16];
    {
        let mut puts: Vec<Put<'_>> =
            smalls.iter().map(|(at, bytes)| ab.put(&a, bytes, base + *at as u64, &b_key).unwrap()).collect();
        puts.push(ab.put(&a, &first, base + 300, &b_key).unwrap());
        a.fence().unwrap();
        puts.push(ab.put(&a, &second, base + 300, &b_key).unwrap());
        drive(&[&a, &b], "small puts", || {
            let mut all = true;
            for p in &mut puts {
                all &= a.is_done(p)?;
            }
            Ok(all)
        });
        let mut flush = ab.flush_nb(&a).unwrap();
        drive(&[&a, &b], "endpoint flush", || a.is_done(&mut flush));
    }
    for (at, bytes) in &smalls {
        want[*at..*at + bytes.len()].copy_from_slice(bytes);
    }
    want[300..316].copy_from_slice(&[2u8; 16]);
    assert_same("after the small puts", &b_mem.snapshot(), &want);

    // The way back: b puts into a's region.
    {
        let back = pattern(5000, 11);
        let mut put = ba.put(&b, &back, a_region.base() + 1000, &a_key).unwrap();
        let mut flush = b.flush_nb().unwrap();
        drive(&[&a, &b], "put back", || Ok(b.is_done(&mut put)? & b.is_done(&mut flush)?));
        let mut want_a = vec![0u8; a_mem.len];
        want_a[1000..6000].copy_from_slice(&back);
        assert_same("after the put back", &a_mem.snapshot(), &want_a);
    }

    // An empty put completes at once; out of range and misuse are refused.
    assert!(ab.put(&a, &[], base, &b_key).unwrap().is_complete());
    let err = ab.put(&a, &[0; 9], base + 2 * MIB as u64 - 8, &b_key).unwrap_err();
    assert!(matches!(err, UcxError::OutOfRange { .. }), "{err}");
    let err = ab.put(&a, &[0; 1], base - 1, &b_key).unwrap_err();
    assert!(matches!(err, UcxError::OutOfRange { .. }), "{err}");
    let err = ab.put(&b, &[0; 1], base, &b_key).unwrap_err();
    assert!(matches!(err, UcxError::Misuse(_)), "{err}");
    let err = ba.put(&b, &[0; 1], base, &b_key).unwrap_err();
    assert!(matches!(err, UcxError::Misuse(_)), "{err}");
    assert!(ab.failed().is_none() && ba.failed().is_none());
    assert_same("after the refused puts", &b_mem.snapshot(), &want);

    // Progress counts: once idle, progress reports nothing (soon), and
    // never an absurd count.
    let mut idle_seen = false;
    for _ in 0..10_000 {
        let (na, nb) = (a.progress(), b.progress());
        assert!(na < 1 << 20 && nb < 1 << 20, "progress counts {na}, {nb}");
        if na == 0 && nb == 0 {
            idle_seen = true;
            break;
        }
    }
    assert!(idle_seen, "the workers never went idle");
    a.fence().unwrap();
    b.fence().unwrap();

    drop((a_key, b_key));
    close_all(&a, &b, vec![ab, ba]);
    drop((a_region, b_region));
    drop((a, b));
    eprintln!(
        "ucx loopback (tls {}): 1 MiB put + flush, one thread driving both workers: {big_time:?}",
        tls.unwrap_or("default")
    );
}

#[test]
fn loopback_tcp() {
    loopback("loopback_tcp", Some("tcp"));
}

#[test]
fn loopback_default_transports() {
    loopback("loopback_default_transports", None);
}

/// What an active-message handler of these tests received: each
/// message's header and data.
type Received = Arc<std::sync::Mutex<Vec<(Vec<u8>, Option<Vec<u8>>)>>>;

/// Two workers over TCP, `b` recording every active message of id 3 it
/// handles, and an endpoint from `a` to `b`; `None` (after a SKIPPED line)
/// without UCX.
fn am_pair(test: &str) -> Option<(Context, Worker, Worker, Endpoint, Received)> {
    let ucx = ucx_or_skip(test)?;
    let ctx = Context::new(&ucx, Some("tcp"), false).unwrap();
    let a = Worker::new(&ctx).unwrap();
    let b = Worker::new(&ctx).unwrap();
    let got: Received = Arc::default();
    let sink = got.clone();
    b.set_am_handler(3, move |h, d| sink.lock().unwrap().push((h.to_vec(), d.map(<[u8]>::to_vec)))).unwrap();
    let ab = a.connect(&b.address().unwrap()).unwrap();
    Some((ctx, a, b, ab, got))
}

/// Active messages over TCP: header and scattered parts arrive whole and
/// in order, in the handler, within the target's progress; sizes from
/// nothing to past UCX's eager fragments.
#[test]
fn active_messages_arrive_whole_in_order() {
    let Some((_ctx, a, b, ab, got)) = am_pair("active_messages_arrive_whole_in_order") else { return };
    let sizes = [(0usize, 0usize), (1, 0), (5, 3), (64, 4096), (100_000, 7), (300_000, 200_000)];
    // All sent before any is progressed.
    let bytes: Vec<_> = (0..sizes.len())
        .map(|i| ((i as u64).to_le_bytes(), pattern(sizes[i].0, i as u32), pattern(sizes[i].1, 100 + i as u32)))
        .collect();
    let parts: Vec<_> = bytes.iter().map(|(_, p1, p2)| [IoPart::new(p1), IoPart::new(p2)]).collect();
    let mut reqs: Vec<_> = bytes.iter().zip(&parts).map(|((h, ..), ps)| ab.am_send(&a, 3, h, ps).unwrap()).collect();
    drive(&[&a, &b], "the active messages sent", || {
        for r in &mut reqs {
            if !a.is_done(r)? {
                return Ok(false);
            }
        }
        Ok(true)
    });
    drop(reqs);
    let want: Vec<_> = bytes.iter().map(|(h, p1, p2)| (h.to_vec(), Some([&p1[..], &p2[..]].concat()))).collect();
    drive(&[&a, &b], "every active message handled", || Ok(got.lock().unwrap().len() == sizes.len()));
    let got = got.lock().unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.0, w.0, "message {i}: header");
        assert_same(&format!("message {i}"), g.1.as_deref().expect("eager data"), w.1.as_deref().unwrap());
    }
    close_all(&a, &b, vec![ab]);
}

/// The largest send the fabric makes over active messages arrives whole:
/// a header of `AM_HEADER_MAX` bytes (a count and 130 pieces) and
/// `MAX_PIECES` scattered parts, payloads of 16 KiB between short runs, as
/// a batch that gathers `MAX_GATHERED` payloads sends them.
#[test]
fn the_largest_header_and_the_most_pieces_arrive_whole() {
    use crate::fabric::am::AM_HEADER_MAX;
    use crate::fabric::{MAX_GATHERED, MAX_PIECES};
    let Some((_ctx, a, b, ab, got)) = am_pair("the_largest_header_and_the_most_pieces_arrive_whole") else { return };
    assert_eq!(MAX_PIECES, 2 * MAX_GATHERED + 2);
    let header = pattern(AM_HEADER_MAX, 7);
    let pieces: Vec<Vec<u8>> =
        (0..MAX_PIECES).map(|i| pattern(if i % 2 == 1 { 16 << 10 } else { 40 + i }, 1000 + i as u32)).collect();
    let parts: Vec<_> = pieces.iter().map(|p| IoPart::new(p)).collect();
    let mut req = ab.am_send(&a, 3, &header, &parts).unwrap();
    drive(&[&a, &b], "the largest active message sent", || a.is_done(&mut req));
    drop(req);
    drive(&[&a, &b], "the largest active message handled", || Ok(got.lock().unwrap().len() == 1));
    let got = got.lock().unwrap();
    assert_same("the header", &got[0].0, &header);
    assert_same("the pieces", got[0].1.as_deref().expect("data"), &pieces.concat());
    close_all(&a, &b, vec![ab]);
}

/// The target's worker progresses on its own thread (as a trustee's loop
/// would), having been moved there; the origin uses the blocking calls.
#[test]
fn put_to_a_worker_on_another_thread() {
    let Some(ucx) = ucx_or_skip("put_to_a_worker_on_another_thread") else { return };
    let ctx = Context::new(&ucx, Some("tcp"), false).unwrap();
    let target = Arc::new(Target::new(1 << 20));
    let b = Worker::new(&ctx).unwrap(); // created here, moved to the target thread
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (ctx, target, stop) = (ctx.clone(), target.clone(), stop.clone());
        std::thread::spawn(move || {
            // SAFETY: the target outlives the region and all puts (the
            // thread is joined before it goes).
            let region = unsafe { ctx.mem_map(target.ptr, target.len) }.unwrap();
            tx.send((b.address().unwrap(), region.pack_rkey().unwrap(), region.base(), region.len())).unwrap();
            let start = Instant::now();
            while !stop.load(Ordering::Acquire) && start.elapsed() < WAIT {
                if b.progress() == 0 {
                    std::thread::yield_now();
                }
            }
            drop(region);
            drop(b);
        })
    };
    let (b_addr, packed, base, len) = rx.recv_timeout(WAIT).unwrap();
    let a = Worker::new(&ctx).unwrap();
    let ab = a.connect(&b_addr).unwrap();
    let key = ab.unpack_rkey(&a, &packed, base, len).unwrap();

    let data = pattern(len, 5);
    let start = Instant::now();
    let put = ab.put(&a, &data, base, &key).unwrap();
    a.wait(put, WAIT).unwrap();
    a.flush().unwrap();
    let blocking_time = start.elapsed();
    // Many small puts, flushed once.
    let start = Instant::now();
    let small = pattern(256, 9);
    for i in 0..1000u64 {
        let put = ab.put(&a, &small, base + i * 256, &key).unwrap();
        a.wait(put, WAIT).unwrap();
    }
    ab.flush(&a).unwrap();
    let small_time = start.elapsed();
    drop(key);
    ab.close(&a).unwrap();
    assert_eq!(a.pending_closes(), 0);

    stop.store(true, Ordering::Release);
    thread.join().unwrap();
    let mut want = data.clone();
    for i in 0..1000 {
        want[i * 256..(i + 1) * 256].copy_from_slice(&small);
    }
    assert_same("after puts to the other thread", &target.snapshot(), &want);
    eprintln!(
        "ucx tcp, target progressing on its own thread: 1 MiB put + flush {blocking_time:?}; \
         1000 puts of 256 B, each waited for, + flush {small_time:?}"
    );
}

/// A peer that goes away fails the endpoint (reported, not fatal).
#[test]
fn lost_peer_is_reported() {
    let Some(ucx) = ucx_or_skip("lost_peer_is_reported") else { return };
    let ctx = Context::new(&ucx, Some("tcp"), false).unwrap();
    let a = Worker::new(&ctx).unwrap();
    let b = Worker::new(&ctx).unwrap();
    let ab = a.connect(&b.address().unwrap()).unwrap();
    let mem = Target::new(4096);
    // SAFETY: mem outlives the region and every put into it.
    let region = unsafe { ctx.mem_map(mem.ptr, mem.len) }.unwrap();
    let key = ab.unpack_rkey(&a, &region.pack_rkey().unwrap(), region.base(), region.len()).unwrap();
    {
        let mut put = ab.put(&a, b"before", region.base(), &key).unwrap();
        let mut flush = a.flush_nb().unwrap();
        drive(&[&a, &b], "put before the loss", || Ok(a.is_done(&mut put)? & a.is_done(&mut flush)?));
    }
    assert_eq!(&mem.snapshot()[..6], b"before");
    assert!(ab.failed().is_none());

    drop(b); // the peer's worker goes away, and with it its connections
    let start = Instant::now();
    while ab.failed().is_none() {
        assert!(start.elapsed() < WAIT, "the lost peer was not reported within {WAIT:?}");
        if a.progress() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let why = ab.failed().unwrap();
    let err = ab.put(&a, b"after", region.base(), &key).unwrap_err();
    assert!(matches!(&err, UcxError::EndpointFailed(w) if *w == why), "{err}");
    eprintln!("ucx lost peer reported as: {why}");
    drop(key);
    drop(ab);
    let start = Instant::now();
    while a.pending_closes() > 0 {
        assert!(start.elapsed() < WAIT, "closing the failed endpoint");
        a.progress();
    }
    drop(region);
}

/// A put dropped before it completed (the target never progresses) is
/// waited for a bounded time, then cancelled by force-closing its endpoint:
/// no hang, no crash, and the endpoint says why it is unusable.
#[test]
fn dropping_an_unfinished_put_closes_its_endpoint() {
    let Some(ucx) = ucx_or_skip("dropping_an_unfinished_put_closes_its_endpoint") else { return };
    let ctx = Context::new(&ucx, Some("tcp"), false).unwrap();
    let a = Worker::new(&ctx).unwrap();
    let b = Worker::new(&ctx).unwrap();
    let ab = a.connect(&b.address().unwrap()).unwrap();
    // More than the kernel buffers of a loopback connection hold, so the
    // put cannot complete while b does not progress.
    let len = 64 << 20;
    let mem = Target::new(len);
    // SAFETY: mem outlives the region and every put into it (b's worker,
    // which applies them, is dropped first).
    let region = unsafe { ctx.mem_map(mem.ptr, mem.len) }.unwrap();
    let key = ab.unpack_rkey(&a, &region.pack_rkey().unwrap(), region.base(), region.len()).unwrap();
    {
        let mut warm = ab.put(&a, b"connect", region.base(), &key).unwrap();
        drive(&[&a, &b], "first put", || a.is_done(&mut warm));
    }
    let src = pattern(len, 1);
    let start = Instant::now();
    {
        let mut put = ab.put(&a, &src, region.base(), &key).unwrap();
        for _ in 0..1000 {
            a.progress();
        }
        assert!(!a.is_done(&mut put).unwrap(), "a 64 MiB put completed without the target progressing");
        // dropped here, unfinished
    }
    let took = start.elapsed();
    assert!(took < super::worker::PUT_DROP_TIMEOUT + Duration::from_secs(5), "dropping the put took {took:?}");
    drop(src);
    let why = ab.failed().expect("the endpoint of an abandoned put still looks usable");
    assert!(why.contains("dropped"), "{why}");
    let err = ab.put(&a, b"x", region.base(), &key).unwrap_err();
    assert!(matches!(err, UcxError::EndpointFailed(_)), "{err}");
    drop(key);
    drop(ab);
    drive(&[&a], "closing", || Ok(a.pending_closes() == 0));
    drop(b);
    drop(a);
    drop(region);
}

#[test]
fn missing_library_names_the_package() {
    let err = Ucx::load_from("libgossamer-no-such-ucx.so.0").err().expect("a library that does not exist loaded");
    assert!(matches!(err, UcxError::NotFound { .. }), "{err}");
    let text = err.to_string();
    assert!(text.starts_with("UCX not found (libgossamer-no-such-ucx.so.0): apt-get install libucx0 ("), "{text}");
    assert!(text.contains("libgossamer-no-such-ucx.so.0:") || text.len() > 70, "no loader error in: {text}");
    let err = UcxError::NotFound { library: ffi::LIBUCP.into(), reason: "cannot open".into() };
    assert_eq!(err.to_string(), "UCX not found (libucp.so.0): apt-get install libucx0 (cannot open)");

    // Loaded once: the same library, or the same error, every time.
    match (Ucx::load(), Ucx::load()) {
        (Ok(x), Ok(y)) => assert!(Arc::ptr_eq(&x, &y)),
        (Err(x), Err(y)) => assert_eq!(x.to_string(), y.to_string()),
        _ => panic!("Ucx::load changed its answer"),
    }
}

#[test]
fn status_pointers_and_texts() {
    use std::ffi::c_void;
    let p = |v: isize| v as *mut c_void;
    assert!(!ffi::ptr_is_err(std::ptr::null_mut()));
    assert!(!ffi::ptr_is_err(p(4096)));
    assert!(ffi::ptr_is_err(p(-1)));
    assert!(ffi::ptr_is_err(p(-100)));
    assert!(!ffi::ptr_is_err(p(-101)));
    assert_eq!(ffi::ptr_status(p(-25)), ffi::UCS_ERR_CONNECTION_RESET);
    assert_eq!(ffi::status_of(0x1234_56fb), -5); // only the low byte counts

    let Some(ucx) = ucx_or_skip("status_pointers_and_texts") else { return };
    assert_eq!(ucx.version.0, 1);
    assert_eq!(ucx.status_text(ffi::UCS_OK), "Success");
    assert!(ucx.status_text(ffi::UCS_ERR_CONNECTION_RESET).to_lowercase().contains("reset"));
    assert_eq!(ucx.status_text(-45), "link failure -45");
    assert_eq!(ucx.status_text(-70), "endpoint failure -70");
    assert_eq!(ucx.status_text(-99), "unknown UCX status -99");
    let err = ucx.error("ucp_something", ffi::UCS_ERR_INVALID_PARAM);
    assert_eq!(err.to_string(), "ucp_something failed: Invalid parameter (ucs_status_t -5)");
}

#[test]
fn bad_arguments_are_errors() {
    let Some(ucx) = ucx_or_skip("bad_arguments_are_errors") else { return };
    let err = Context::new(&ucx, Some("tc\0p"), false).err().unwrap();
    assert!(matches!(err, UcxError::Misuse(_)), "{err}");
    let _ =
        std::io::stderr().write_all(b"(bad_arguments_are_errors: UCX logs the refusal of transport 'no-such-tl')\n");
    let err = Context::new(&ucx, Some("no-such-tl"), false).err().unwrap();
    assert!(
        matches!(&err, UcxError::Call { function: "ucp_init_version", status, text } if *status < 0 && !text.is_empty()),
        "{err}"
    );
    let ctx = Context::new(&ucx, Some("tcp"), false).unwrap();
    let a = Worker::new(&ctx).unwrap();
    let b = Worker::new(&ctx).unwrap();
    assert!(matches!(a.connect(&[]), Err(UcxError::Misuse(_))));
    let ab = a.connect(&b.address().unwrap()).unwrap();
    assert!(matches!(ab.unpack_rkey(&a, &[], 4096, 10), Err(UcxError::Misuse(_))));
    assert!(matches!(ab.unpack_rkey(&b, &[1], 4096, 10), Err(UcxError::Misuse(_))));
    assert!(matches!(ab.unpack_rkey(&a, &[1], u64::MAX, 10), Err(UcxError::Misuse(_))));
    let mut flush = b.flush_nb().unwrap();
    assert!(matches!(a.is_done(&mut flush), Err(UcxError::Misuse(_))));
    drive(&[&a, &b], "flush", || b.is_done(&mut flush));
    close_all(&a, &b, vec![ab]);
}

/// Endpoints, keys and regions may outlive their worker and context (and
/// be dropped on another thread): the last one cleans up.
#[test]
fn handles_outlive_their_worker_and_context() {
    let Some(ucx) = ucx_or_skip("handles_outlive_their_worker_and_context") else { return };
    let ctx = Context::new(&ucx, Some("tcp"), false).unwrap();
    let a = Worker::new(&ctx).unwrap();
    let b = Worker::new(&ctx).unwrap();
    let ab = a.connect(&b.address().unwrap()).unwrap();
    let mem = Target::new(4096);
    // SAFETY: mem outlives the region; nothing is put into it.
    let region = unsafe { ctx.mem_map(mem.ptr, mem.len) }.unwrap();
    let key = ab.unpack_rkey(&a, &region.pack_rkey().unwrap(), region.base(), region.len()).unwrap();
    drop(ctx);
    drop(a);
    std::thread::spawn(move || {
        drop(ab);
        drop(key); // the worker goes with this last handle
    })
    .join()
    .unwrap();
    drop(b);
    drop(region); // the context goes with this last handle
}

#[test]
fn thread_safety_of_the_handles() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<Context>();
    sync::<Context>();
    send::<super::MemRegion>();
    sync::<super::MemRegion>();
    send::<Worker>(); // but not Sync: one thread at a time drives it
    send::<Endpoint>();
    sync::<Endpoint>();
    send::<super::RemoteKey>();
    sync::<super::RemoteKey>();
    send::<UcxError>();
    sync::<UcxError>();
    send::<Arc<Ucx>>();
}
