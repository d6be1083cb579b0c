//! The echo benchmark of the thesis (§3.3.1): every thread is both a server
//! (its trustee holds an echo property) and a client (a fiber that keeps
//! many asynchronous requests in flight to targets chosen uniformly at
//! random). Each request carries a payload that the trustee sends back.
//!
//! * One run: `GOSSAMER_PROCESSES=2 ECHO_THREADS=4 ECHO_SIZE=32 cargo run --release --example echo`
//!   prints one `ECHO ...` line.
//! * The sweep: `cargo run --release --example echo -- --sweep [--quick]`
//!   runs processes × threads at 32 bytes, then sizes 16 B … 16 KiB with
//!   all threads in 1 process and in 2 (`ECHO_SWEEP_THREADS`, default the
//!   core count), and in 2 with `SharedBytes` payloads, the runs
//!   interleaved, with the ratios, the rate at which
//!   payload crosses between the processes, and this machine's
//!   single-threaded `memcpy` bandwidth; it writes `results/echo_scaling.csv`,
//!   `results/echo_size.csv` and SVG plots beside them. Each point is the
//!   median of several runs.
//! * Across hosts (`scripts/fabric-hosts.sh` runs both beside UCX's own
//!   figures): `ECHO_TARGETS=remote` sends every request to a thread of
//!   another process, so that all payload crosses; `ECHO_RTT=1` measures
//!   instead the round trip of one blocking `apply_with` from thread 0 to
//!   the first thread of the last process, one request at a time, and
//!   prints one `RTT ...` line (median, 99th percentile and mean, µs).
//!   `ECHO_FLOW=one-way` (with `ECHO_TARGETS=remote`) makes the payload
//!   cross in one direction only, as UCX's bandwidth tests do: only the
//!   first process's threads are clients, and each trustee answers with
//!   the payload's length instead of the payload.
//!   `echo --plot FILE.csv` draws that script's CSV as FILE.svg.
//! * `ECHO_PAYLOAD=shared` sends `SharedBytes` payloads instead of
//!   `Vec<u8>`: between the processes of one host they cross by reference,
//!   and the trustee sends back the same block.

use std::cell::Cell;
use std::process::Command;
use std::rc::Rc;
use std::time::{Duration, Instant};

use gossamer::{SharedBytes, Trust};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The client loop on one thread: returns the echoes completed. Targets
/// are drawn uniformly from `servers`; one way, each trustee answers with
/// the payload's length instead of the payload. Payloads are `Vec<u8>`, or
/// `SharedBytes` (`shared`), which cross to the host's other processes by
/// reference.
fn client((servers, size, millis, seed, one_way, shared): (Vec<Trust<u64>>, usize, u64, u64, bool, bool)) -> u64 {
    let run = (servers, size, millis, seed);
    match (one_way, shared) {
        (true, false) => drive(run, <[u8]>::to_vec, |served, p: Vec<u8>| count(served, p.len()), |len| *len as usize),
        (false, false) => drive(run, <[u8]>::to_vec, echo, Vec::len),
        (true, true) => drive(
            run,
            SharedBytes::copy_from_slice,
            |served, p: SharedBytes| count(served, p.len()),
            |len| *len as usize,
        ),
        (false, true) => drive(run, SharedBytes::copy_from_slice, echo, |p| p.len()),
    }
}

fn echo<P>(served: &mut u64, p: P) -> P {
    *served += 1;
    p
}

fn count(served: &mut u64, len: usize) -> u64 {
    *served += 1;
    len as u64
}

/// The client loop, each request's payload made by `make` and served by
/// `serve`, whose answer says how many bytes it was sent (`len`).
fn drive<A: gossamer::Transferable, U: gossamer::Transferable>(
    (servers, size, millis, seed): (Vec<Trust<u64>>, usize, u64, u64),
    make: fn(&[u8]) -> A,
    serve: fn(&mut u64, A) -> U,
    len: fn(&U) -> usize,
) -> u64 {
    // Keep at most 256 requests, and about 4 MiB of payload, in flight.
    let window = (256u64).min((4 << 20) / size.max(1) as u64).max(1);
    let done = Rc::new(Cell::new(0u64));
    let mut issued = 0u64;
    let mut x = seed | 1;
    let payload = vec![0xa5u8; size];
    let end = Instant::now() + Duration::from_millis(millis);
    while Instant::now() < end {
        // Top the window up (at most one window's worth per round: requests
        // to our own trustee complete at once).
        for _ in 0..window {
            if issued - done.get() >= window {
                break;
            }
            // xorshift: a uniformly random target.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let target = &servers[(x % servers.len() as u64) as usize];
            let d = done.clone();
            target.apply_with_then(serve, make(&payload), move |answer: U| {
                debug_assert_eq!(len(&answer), size);
                d.set(d.get() + 1)
            });
            issued += 1;
        }
        gossamer::yield_now();
    }
    while done.get() < issued {
        gossamer::yield_now();
    }
    done.get()
}

/// One blocking round trip after another from this fiber to `server`,
/// each carrying `size` bytes there and back, for `millis`; returns every
/// round trip's time in nanoseconds.
fn round_trips((server, size, millis): (Trust<u64>, usize, u64)) -> Vec<u64> {
    let payload = vec![0x5au8; size];
    let echo = |served: &mut u64, p: Vec<u8>| {
        *served += 1;
        p
    };
    // Warm up: connections, slots and the far thread's first wake-up.
    for _ in 0..100 {
        server.apply_with(echo, payload.clone());
    }
    let mut times = Vec::new();
    let end = Instant::now() + Duration::from_millis(millis);
    while Instant::now() < end {
        let p = payload.clone();
        let t = Instant::now();
        let back = server.apply_with(echo, p);
        times.push(t.elapsed().as_nanos() as u64);
        assert_eq!(back.len(), size, "the echo came back whole");
    }
    times
}

fn rtt_main(size: usize, millis: u64) {
    let topo = gossamer::topology();
    let far = topo.processes.last().map_or(0, |r| r.start);
    let far = if far == 0 { topo.threads() - 1 } else { far };
    let server = gossamer::entrust_on(far, 0u64);
    let mut times = gossamer::spawn_with(0, round_trips, (server.clone(), size, millis)).join().expect("round trips");
    let served = server.apply_with(|c, ()| *c, ());
    assert_eq!(served, times.len() as u64 + 100, "every round trip was served once");
    times.sort_unstable();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize] as f64 / 1e3;
    let mean = times.iter().sum::<u64>() as f64 / times.len() as f64 / 1e3;
    println!(
        "RTT processes={} threads={} from=0 to={far} size={size} rounds={} p50_us={:.2} p99_us={:.2} mean_us={mean:.2}",
        topo.processes.len(),
        topo.threads(),
        times.len(),
        at(0.5),
        at(0.99)
    );
}

fn gsm_main() {
    let size = env("ECHO_SIZE", 32);
    let millis = env("ECHO_MILLIS", 1000) as u64;
    if env("ECHO_RTT", 0) == 1 {
        return rtt_main(size, millis);
    }
    let remote_only = std::env::var("ECHO_TARGETS").is_ok_and(|v| v == "remote");
    let shared = match std::env::var("ECHO_PAYLOAD").as_deref() {
        Err(_) | Ok("vec") => false,
        Ok("shared") => true,
        Ok(other) => panic!("ECHO_PAYLOAD={other}: expected 'vec' or 'shared'"),
    };
    let one_way = match std::env::var("ECHO_FLOW").as_deref() {
        Err(_) | Ok("echo") => false,
        Ok("one-way") => true,
        Ok(other) => panic!("ECHO_FLOW={other}: expected 'echo' or 'one-way'"),
    };
    let topo = gossamer::topology();
    let n = topo.threads();
    assert!(
        !remote_only || topo.processes.len() > 1,
        "ECHO_TARGETS=remote needs more than one process (set GOSSAMER_PROCESSES)"
    );
    assert!(!one_way || remote_only, "ECHO_FLOW=one-way needs ECHO_TARGETS=remote");
    let servers: Vec<Trust<u64>> = (0..n).map(|t| gossamer::entrust_on(t, 0u64)).collect();
    // Each client's targets: every thread, or only those of other processes.
    let targets = |t: usize| -> Vec<Trust<u64>> {
        let mine = topo.rank_of(t);
        (0..n).filter(|&s| !remote_only || topo.rank_of(s) != mine).map(|s| servers[s].clone()).collect()
    };
    let start = Instant::now();
    // One way: only the first process's threads are clients.
    let clients = if one_way { topo.processes[0].clone() } else { 0..n };
    let fibers: Vec<_> = clients
        .map(|t| {
            gossamer::spawn_with(
                t,
                client,
                (targets(t), size, millis, 0x9e37_79b9_7f4a_7c15 ^ t as u64, one_way, shared),
            )
        })
        .collect();
    let ops: u64 = fibers.into_iter().map(|f| f.join().expect("client fiber")).sum();
    let secs = start.elapsed().as_secs_f64();
    let served: u64 = servers.iter().map(|s| s.apply_with(|c, ()| *c, ())).sum();
    assert_eq!(served, ops, "every echo was served once");
    println!(
        "ECHO processes={} threads={n} size={size} targets={} flow={} payload={} ops={ops} seconds={secs:.3} mops={:.3} mbps={:.1}",
        topo.processes.len(),
        if remote_only { "remote" } else { "all" },
        if one_way { "one-way" } else { "echo" },
        if shared { "shared" } else { "vec" },
        ops as f64 / secs / 1e6,
        // Payload that crossed: both ways for an echo.
        ops as f64 * size as f64 * if one_way { 1.0 } else { 2.0 } / secs / 1e6
    );
}

/// Runs one configuration as its own program and returns its Mops.
fn run_once(processes: usize, threads: usize, size: usize, millis: u64) -> f64 {
    run_payload(processes, threads, size, millis, "vec")
}

/// [`run_once`] with payloads of a kind (`ECHO_PAYLOAD`: `vec`, `shared`).
fn run_payload(processes: usize, threads: usize, size: usize, millis: u64, payload: &str) -> f64 {
    let out = Command::new(std::env::current_exe().expect("our executable"))
        .env("ECHO_PAYLOAD", payload)
        .env("GOSSAMER_PROCESSES", processes.to_string())
        .env("ECHO_THREADS", (processes * threads).to_string())
        .env("ECHO_SIZE", size.to_string())
        .env("ECHO_MILLIS", millis.to_string())
        .output()
        .expect("cannot run the echo program");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "echo run failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    let line = text.lines().find(|l| l.starts_with("ECHO ")).expect("no ECHO line");
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix("mops="))
        .and_then(|v| v.parse().ok())
        .expect("no mops figure")
}

/// Single-threaded `memcpy` bandwidth of this machine, GB/s: the median of
/// copies of a 64 MiB buffer (far larger than the caches).
fn memcpy_gbps() -> f64 {
    let n = 64 << 20;
    let src = vec![0x5au8; n];
    let mut dst = vec![0u8; n];
    let rates: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            dst.copy_from_slice(&src);
            std::hint::black_box(&mut dst);
            n as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    median(rates)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// A small line chart as SVG: one series per entry of `series`.
fn svg(path: &str, title: &str, xlabel: &str, xs: &[String], series: &[(String, Vec<f64>)]) {
    svg_y(path, title, xlabel, "Mops/s", xs, series)
}

/// [`svg`] with the y axis named.
fn svg_y(path: &str, title: &str, xlabel: &str, ylabel: &str, xs: &[String], series: &[(String, Vec<f64>)]) {
    let (w, h, m) = (640.0, 400.0, 60.0);
    let ymax = series.iter().flat_map(|s| s.1.iter().copied()).fold(0.0f64, f64::max).max(1e-9) * 1.1;
    let x = |i: usize| m + (w - 2.0 * m) * i as f64 / (xs.len().max(2) - 1) as f64;
    let y = |v: f64| h - m - (h - 2.0 * m) * v / ymax;
    let colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
    let mut s = format!("<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n<text x='{}' y='24' text-anchor='middle' font-size='15'>{title}</text>\n", w / 2.0);
    s += &format!("<line x1='{m}' y1='{}' x2='{}' y2='{}' stroke='black'/><line x1='{m}' y1='{m}' x2='{m}' y2='{}' stroke='black'/>\n", h - m, w - m, h - m, h - m);
    for k in 0..=4 {
        let v = ymax * k as f64 / 4.0;
        s += &format!("<text x='{}' y='{}' text-anchor='end'>{v:.2}</text><line x1='{m}' y1='{}' x2='{}' y2='{}' stroke='#ddd'/>\n", m - 6.0, y(v) + 4.0, y(v), w - m, y(v));
    }
    for (i, l) in xs.iter().enumerate() {
        s += &format!("<text x='{}' y='{}' text-anchor='middle'>{l}</text>\n", x(i), h - m + 18.0);
    }
    s += &format!("<text x='{}' y='{}' text-anchor='middle'>{xlabel}</text><text x='16' y='{}' transform='rotate(-90 16 {})' text-anchor='middle'>{ylabel}</text>\n", w / 2.0, h - 16.0, h / 2.0, h / 2.0);
    for (k, (name, vals)) in series.iter().enumerate() {
        let c = colors[k % colors.len()];
        let pts: Vec<String> = vals.iter().enumerate().map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v))).collect();
        s += &format!("<polyline fill='none' stroke='{c}' stroke-width='2' points='{}'/>\n", pts.join(" "));
        s += &format!("<text x='{}' y='{}' fill='{c}'>{name}</text>\n", w - m - 140.0, m + 16.0 * k as f64);
    }
    s += "</svg>\n";
    std::fs::write(path, s).expect("cannot write the plot");
}

fn sweep(quick: bool) {
    let (runs, millis) = if quick { (3, 300) } else { (5, 1000) };
    std::fs::create_dir_all("results").expect("results folder");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("echo sweep on {cores} cores, median of {runs} runs of {millis} ms each");
    let mut csv = String::from("processes,threads_per_process,size,mops_median\n");
    let mut by_threads: Vec<(String, Vec<f64>)> = vec![];
    let procs = [1usize, 2, 3, 4];
    for tpp in [1usize, 2] {
        let mut vals = vec![];
        for &p in &procs {
            let m = median((0..runs).map(|_| run_once(p, tpp, 32, millis)).collect());
            println!("processes {p} x threads {tpp}, 32 B: {m:.3} Mops/s");
            csv += &format!("{p},{tpp},32,{m:.4}\n");
            vals.push(m);
        }
        by_threads.push((format!("{tpp} thread(s)/process"), vals));
    }
    std::fs::write("results/echo_scaling.csv", csv).expect("csv");
    let xs: Vec<String> = procs.iter().map(|p| p.to_string()).collect();
    svg("results/echo_scaling.svg", &format!("echo, 32-byte requests ({cores} cores)"), "processes", &xs, &by_threads);

    // Sizes: 1 process against 2 processes of the same total thread count,
    // the runs interleaved; and the rate at which payload bytes cross.
    let threads = env("ECHO_SWEEP_THREADS", cores.max(2)).max(2) / 2 * 2;
    let bw = memcpy_gbps();
    println!("single-threaded memcpy: {bw:.2} GB/s; sizes with {threads} threads in all");
    println!(
        "| size | 1 process Mops/s | 2 processes Mops/s | ratio | 2 processes GB/s crossing | target GB/s (bw/4 x threads) \
         | 2 processes, SharedBytes, Mops/s | ratio to 1 process |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let sizes = [16usize, 64, 256, 1024, 4096, 8192, 16384];
    let mut csv =
        String::from("size,threads,mops_1p,mops_2p,ratio,gbps_crossing_2p,memcpy_gbps,mops_2p_shared,ratio_shared\n");
    let (mut one, mut two, mut two_shared) = (vec![], vec![], vec![]);
    for &s in &sizes {
        let (mut a, mut b, mut c) = (vec![], vec![], vec![]);
        for _ in 0..runs {
            a.push(run_once(1, threads, s, millis));
            b.push(run_once(2, threads / 2, s, millis));
            c.push(run_payload(2, threads / 2, s, millis, "shared"));
        }
        let (m1, m2, m2s) = (median(a), median(b), median(c));
        // Each echo carries the payload there and back.
        let gbps = m2 * 1e6 * s as f64 * 2.0 / 1e9;
        println!(
            "| {s} B | {m1:.3} | {m2:.3} | {:.2} | {gbps:.2} | {:.2} | {m2s:.3} | {:.2} |",
            m2 / m1,
            bw / 4.0 * threads as f64,
            m2s / m1
        );
        csv += &format!("{s},{threads},{m1:.4},{m2:.4},{:.4},{gbps:.3},{bw:.3},{m2s:.4},{:.4}\n", m2 / m1, m2s / m1);
        one.push(m1);
        two.push(m2);
        two_shared.push(m2s);
    }
    std::fs::write("results/echo_size.csv", csv).expect("csv");
    let xs: Vec<String> = sizes.iter().map(|s| format!("{s} B")).collect();
    svg(
        "results/echo_size.svg",
        &format!("echo vs request size, {threads} threads ({cores} cores)"),
        "request size",
        &xs,
        &[("1 process".into(), one), ("2 processes".into(), two), ("2 processes, SharedBytes".into(), two_shared)],
    );
    println!("wrote results/echo_scaling.csv, results/echo_size.csv and their .svg plots");
}

/// Draws the CSV of `scripts/fabric-hosts.sh` (a header line, then one
/// line per size) as an SVG beside it: payload bandwidth per direction of
/// UCX put, UCX stream, the better of them with both directions loaded at
/// once, and Gossamer (echoing, and one way), MB/s, by size.
fn plot_fabric(csv: &str) {
    let text = std::fs::read_to_string(csv).unwrap_or_else(|e| panic!("cannot read {csv}: {e}"));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col =
        |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("{csv} has no column {name:?}"));
    let rows: Vec<Vec<&str>> = lines.filter(|l| !l.trim().is_empty()).map(|l| l.split(',').collect()).collect();
    let xs: Vec<String> = rows.iter().map(|r| format!("{} B", r[col("size")])).collect();
    let series = [
        ("UCX put", "ucx_put_mbps"),
        ("UCX stream", "ucx_stream_mbps"),
        ("UCX both ways at once", "ucx_both_mbps"),
        ("Gossamer echo", "gossamer_mbps"),
        ("Gossamer one way", "gossamer_oneway_mbps"),
    ]
    .iter()
    .map(|(label, c)| {
        let i = col(c);
        (label.to_string(), rows.iter().map(|r| r[i].parse().unwrap_or(0.0)).collect())
    })
    .collect::<Vec<_>>();
    let out = csv.strip_suffix(".csv").unwrap_or(csv).to_string() + ".svg";
    svg_y(&out, "payload bandwidth between 2 hosts, per direction", "size", "MB/s", &xs, &series);
    println!("wrote {out}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--plot") {
        return plot_fabric(args.get(i + 1).expect("--plot FILE.csv"));
    }
    if args.iter().any(|a| a == "--sweep") {
        return sweep(args.iter().any(|a| a == "--quick"));
    }
    gossamer::main(gsm_main, env("ECHO_THREADS", 2));
}
