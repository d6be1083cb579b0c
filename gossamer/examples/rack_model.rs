//! The cost model of a rack (§3.2.8–3.2.9 of the thesis): how many UCX
//! endpoints a program over several hosts opens, and how much shared memory
//! each host's region takes, from the crate's own layout
//! (`gossamer::rack::region_bytes`).
//!
//! `cargo run --release --example rack_model` prints the thesis's rack of
//! 12 hosts × 32 threads; `-- --hosts H --threads-per-host T` any other.
//! Nothing is started: this only computes.

use gossamer::rack::{region_bytes, RegionBytes};

const USAGE: &str = "usage: rack_model [--hosts H] [--threads-per-host T]
  (default: the thesis's rack, 12 hosts x 32 threads)";

/// `--hosts H --threads-per-host T` (also `--name=value`), by hand.
fn args() -> Result<(usize, usize), String> {
    let (mut hosts, mut per_host) = (12usize, 32usize);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (a.clone(), None),
        };
        let target = match name.as_str() {
            "--hosts" => &mut hosts,
            "--threads-per-host" => &mut per_host,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {a:?}")),
        };
        let v = inline.or_else(|| it.next()).ok_or_else(|| format!("{name} needs a value"))?;
        *target = v.parse().map_err(|_| format!("{name} {v:?} is not a number"))?;
        if *target == 0 {
            return Err(format!("{name} must be at least 1"));
        }
    }
    Ok((hosts, per_host))
}

/// Bytes, with a binary unit.
fn human(b: usize) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

fn row(what: &str, b: usize) {
    println!("  {what:<44} {:>12}  ({b} bytes)", human(b));
}

fn main() {
    let (hosts, per_host) = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rack_model: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let threads = hosts * per_host;
    println!("rack: {hosts} hosts x {per_host} threads = {threads} threads");

    // Endpoints: each thread opens one per remote host (§3.2.9), where
    // one per remote thread would be the per-pair alternative.
    let per_thread = hosts - 1;
    let endpoints = threads * per_thread;
    let per_pair = threads * (threads - per_host);
    println!("\nUCX endpoints (one per thread and remote host)");
    println!("  per thread: {per_thread}, per host: {}, in all: {endpoints}", per_host * per_thread);
    println!(
        "  one per pair of threads on different hosts instead: {} per thread, {per_pair} in all ({}x as many)",
        threads - per_host,
        per_pair.checked_div(endpoints).unwrap_or(0)
    );

    let r: RegionBytes = region_bytes(threads, per_host);
    println!("\nshared region of one host (every process of the host maps it)");
    row("address space reserved", r.total);
    row("  slots within the host", r.host_slots);
    row("  bulk areas within the host", r.host_bulk);
    row("  slots between hosts (4 arrays)", r.far_slots);
    row("  bulk areas between hosts (4 arrays)", r.far_bulk);
    row("  shared heap (one arena per thread)", r.shared_heap);
    row("  header, doorbells, page padding", r.other);
    println!("slot memory a running program touches (all-to-all; no bulk)");
    row("per host", r.slots_touched);
    row("per thread", r.slots_touched / per_host);
    row("whole rack", r.slots_touched * hosts);
    println!(
        "  (untouched pages of the mapping cost address space only; the bulk areas are\n   \
         touched only by payloads too large for a slot, as far as those reach)"
    );
}
