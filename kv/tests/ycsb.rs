//! The YCSB workloads of `gossamer-kv-load ycsb`: their key distributions,
//! ketama routing, and short end-to-end runs of workloads C and D against
//! two spawned memcached servers (skipped when memcached is not installed,
//! unless `GOSSAMER_KV_REQUIRE_MEMCACHED=1`).

mod common;

use std::collections::HashMap;
use std::process::Command;

use gossamer_kv::load::ketama::Ketama;
use gossamer_kv::load::ycsb::{
    fnvhash64, key_string, zeta_n, ScrambledZipfian, SkewedLatest, SCRAMBLED_ZETAN, ZIPFIAN_CONSTANT,
};
use rand::rngs::SmallRng;
use rand::SeedableRng;

use common::Proc;

#[test]
fn scrambled_zipfian_head_and_range() {
    let records = 10_000;
    let g = ScrambledZipfian::new(records);
    let mut rng = SmallRng::seed_from_u64(42);
    let n = 400_000;
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for _ in 0..n {
        let k = g.next(&mut rng);
        assert!(k < records, "{k} out of range");
        *counts.entry(k).or_default() += 1;
    }
    // The most popular item (Zipfian rank 0) lands on fnvhash64(0) % records
    // and takes about 1/ζ(10^10, 0.99) of the draws (a little more where
    // other items hash onto the same record).
    let top = fnvhash64(0) % records;
    let share = counts[&top] as f64 / n as f64;
    let want = 1.0 / SCRAMBLED_ZETAN;
    assert!(share > want * 0.9 && share < want * 1.2, "top share {share}, want ≈ {want}");
    let (&max_key, _) = counts.iter().max_by_key(|(_, &c)| c).unwrap();
    assert_eq!(max_key, top);
    // Rank 1 gets about 1/(ζ·2^0.99).
    let second = counts[&(fnvhash64(1) % records)] as f64 / n as f64;
    let want2 = want / 2f64.powf(ZIPFIAN_CONSTANT);
    assert!(second > want2 * 0.85 && second < want2 * 1.3, "second share {second}, want ≈ {want2}");
    // Scrambled: the popular records are spread, not clustered at low numbers.
    let low = counts.iter().filter(|(&k, _)| k < records / 10).map(|(_, &c)| c).sum::<u64>() as f64 / n as f64;
    assert!(low < 0.5, "{low} of draws in the lowest tenth");
}

#[test]
fn latest_favours_recent_records() {
    let mut g = SkewedLatest::new(999);
    let mut rng = SmallRng::seed_from_u64(7);
    let n = 200_000;
    let (mut latest_hits, mut recent) = (0, 0);
    for _ in 0..n {
        let k = g.next(&mut rng, 999);
        assert!(k <= 999);
        latest_hits += u64::from(k == 999);
        recent += u64::from(k >= 900);
    }
    let share = latest_hits as f64 / n as f64;
    let want = 1.0 / zeta_n(1000, ZIPFIAN_CONSTANT);
    assert!((share - want).abs() < want * 0.1, "latest share {share}, want ≈ {want}");
    assert!(recent as f64 / n as f64 > 0.6, "{recent} of {n} in the last tenth");
    // As the latest record moves on, so do the reads.
    let mut newest = 0;
    for _ in 0..10_000 {
        let k = g.next(&mut rng, 1999);
        assert!(k <= 1999);
        newest += u64::from(k >= 1000);
    }
    assert!(newest > 8_000, "{newest}");
}

fn servers(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("10.0.0.{}:11211", i + 1)).collect()
}

#[test]
fn ketama_deterministic_balanced_and_consistent() {
    let keys: Vec<String> = (0..40_000).map(key_string).collect();
    let k3 = Ketama::new(&servers(3));
    let k3b = Ketama::new(&servers(3));
    let k4 = Ketama::new(&servers(4));
    let mut counts = [0u64; 4];
    let mut moved = 0;
    for key in &keys {
        let a = k3.server(key.as_bytes());
        assert_eq!(a, k3b.server(key.as_bytes()));
        let b = k4.server(key.as_bytes());
        counts[b] += 1;
        if a != b {
            moved += 1;
            assert_eq!(b, 3, "a key moved between old servers");
        }
    }
    let n = keys.len() as f64;
    for c in counts {
        let share = c as f64 / n;
        assert!((0.17..0.33).contains(&share), "unbalanced: {counts:?}");
    }
    let moved = moved as f64 / n;
    assert!((0.17..0.33).contains(&moved), "{moved} of keys moved from 3 to 4 servers");
    // Default port: libmemcached names the points "host-N"; another port "host:port-N".
    let other = Ketama::new(&["10.0.0.1:11212".to_string(), "10.0.0.2:11212".to_string()]);
    let same = Ketama::new(&servers(2));
    assert!(keys.iter().take(1000).any(|k| other.server(k.as_bytes()) != same.server(k.as_bytes())));
}

fn memcached_installed() -> bool {
    let found = Command::new("memcached").arg("-V").output().is_ok();
    if !found {
        common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
    }
    found
}

/// Runs `ycsb --workload w` against two spawned memcached servers and
/// returns the CSV row as a header → value map.
fn ycsb_run(w: &str) -> HashMap<String, String> {
    let dir = std::env::temp_dir().join(format!("gossamer-kv-ycsb-{}-{w}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("out.csv");
    let _ = std::fs::remove_file(&csv);
    let out = Command::new(env!("CARGO_BIN_EXE_gossamer-kv-load"))
        .args(["ycsb", "--workload", w, "--spawn-memcached", "2", "--records", "2000", "--fields", "4"])
        .args(["--field-length", "20", "--operations", "20000", "--threads", "2", "--conns", "2", "--depth", "4"])
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ycsb {w} failed: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    let body = std::fs::read_to_string(&csv).unwrap();
    let mut lines = body.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let _ = std::fs::remove_dir_all(&dir);
    head.iter().zip(row).map(|(h, v)| (h.to_string(), v.to_string())).collect()
}

#[test]
fn ycsb_c_and_d_against_two_memcached() {
    if !memcached_installed() {
        return;
    }
    let c = ycsb_run("c");
    assert_eq!(c["route"], "ketama");
    assert_eq!(c["servers"].split(' ').count(), 2);
    assert_eq!(c["errors"], "0");
    assert_eq!(c["ops"], "20000");
    assert_eq!(c["reads"], "20000");
    assert_eq!(c["inserts"], "0");
    assert_eq!(c["hit_ratio"], "1.0000");

    let d = ycsb_run("d");
    assert_eq!(d["errors"], "0");
    assert_eq!(d["ops"], "20000");
    let inserts: u64 = d["inserts"].parse().unwrap();
    let reads: u64 = d["reads"].parse().unwrap();
    assert_eq!(inserts + reads, 20_000);
    assert!((600..1400).contains(&inserts), "{inserts} inserts");
    assert_eq!(d["hit_ratio"], "1.0000");
}

#[test]
fn ycsb_route_any_against_gossamer_kv() {
    let p = Proc::kv(&["-t", "2"]);
    let addr = p.addr.to_string();
    for w in ["c", "d"] {
        let out = Command::new(env!("CARGO_BIN_EXE_gossamer-kv-load"))
            .args(["ycsb", "--workload", w, "--server", &addr, "--server", &addr, "--route", "any"])
            .args(["--records", "1000", "--field-length", "10", "--operations", "5000", "--threads", "1"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "ycsb {w} failed: {text}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("(any)") && text.contains("errors 0"), "{text}");
    }
}
