//! Side-by-side runs: start stock memcached and gossamer-kv with the same
//! thread count and memory, fill both with the same keys, then run each
//! workload against each server in turn (alternating which goes first),
//! several times, and report medians and the ratio.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;

use super::driver;
use super::report::{self, RunResult};
use super::workload::{Dist, Workload};

/// Options of `compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The load (its --dist and --set-ratio are replaced by the lists below).
    #[command(flatten)]
    pub workload: Workload,
    /// Worker threads of each server (memcached's and gossamer-kv's -t).
    #[arg(long, default_value_t = 2)]
    pub server_threads: usize,
    /// Item memory of each server, in megabytes (-m).
    #[arg(long, default_value_t = 1024)]
    pub memory_mb: u64,
    /// Repetitions of every workload on every server.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Key distributions to run.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "uniform,zipf")]
    pub dists: Vec<Dist>,
    /// Key-space size for uniform runs (default: --keys).
    #[arg(long)]
    pub uniform_keys: Option<u64>,
    /// Key-space size for Zipf runs (default: --keys).
    #[arg(long)]
    pub zipf_keys: Option<u64>,
    /// Set ratios to run.
    #[arg(long, value_delimiter = ',', default_value = "0.01,0.1")]
    pub set_ratios: Vec<f64>,
    /// The gossamer-kv binary (default: next to this program).
    #[arg(long)]
    pub kv_bin: Option<PathBuf>,
    /// Extra arguments for gossamer-kv, e.g. --kv-arg=--dedicated-trustees --kv-arg=1.
    #[arg(long, allow_hyphen_values = true)]
    pub kv_arg: Vec<String>,
    /// Run several gossamer-kv configurations, each as `label:arguments`
    /// (e.g. `--variant "dedicated:--dedicated-trustees 1"`); replaces the
    /// single default one.
    #[arg(long)]
    pub variant: Vec<String>,
    /// The memcached binary.
    #[arg(long, default_value = "memcached")]
    pub memcached_bin: PathBuf,
    /// Append every run to this CSV file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
}

/// A server process, killed when dropped.
struct ServerProc {
    name: String,
    child: Child,
    addr: SocketAddr,
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Makes the child die with this process, so that no server outlives an
/// interrupted comparison.
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

fn start(name: String, mut cmd: Command, port: u16) -> io::Result<ServerProc> {
    die_with_parent(&mut cmd);
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot start {name} ({:?}): {e}", cmd.get_program())))?;
    let mut p = ServerProc { name, child, addr: SocketAddr::from(([127, 0, 0, 1], port)) };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if TcpStream::connect(p.addr).is_ok() {
            return Ok(p);
        }
        if let Ok(Some(status)) = p.child.try_wait() {
            return Err(io::Error::other(format!("{} exited at start-up: {status}", p.name)));
        }
        thread::sleep(Duration::from_millis(20));
    }
    Err(io::Error::other(format!("{} did not accept connections within 10 s", p.name)))
}

fn kv_bin(a: &CompareArgs) -> PathBuf {
    a.kv_bin.clone().unwrap_or_else(|| {
        let me = std::env::current_exe().unwrap_or_default();
        me.with_file_name("gossamer-kv")
    })
}

/// The gossamer-kv configurations to run: label and extra arguments.
fn variants(a: &CompareArgs) -> Vec<(String, Vec<String>)> {
    if a.variant.is_empty() {
        return vec![("gossamer-kv".into(), a.kv_arg.clone())];
    }
    a.variant
        .iter()
        .map(|v| match v.split_once(':') {
            Some((label, args)) => (label.to_string(), args.split_whitespace().map(String::from).collect()),
            None => (v.clone(), Vec::new()),
        })
        .collect()
}

fn start_servers(a: &CompareArgs) -> io::Result<Vec<ServerProc>> {
    let t = a.server_threads.to_string();
    let m = a.memory_mb.to_string();
    let port = free_port()?;
    let mut mc = Command::new(&a.memcached_bin);
    mc.args(["-l", "127.0.0.1", "-U", "0", "-c", "4096", "-t", &t, "-m", &m, "-p", &port.to_string()]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        mc.args(["-u", "root"]);
    }
    let mut servers = vec![start("memcached".into(), mc, port)?];
    for (label, args) in variants(a) {
        let port = free_port()?;
        let mut kv = Command::new(kv_bin(a));
        kv.args(["-l", "127.0.0.1", "-c", "4096", "-t", &t, "-m", &m, "-p", &port.to_string()]).args(&args);
        servers.push(start(label, kv, port)?);
    }
    Ok(servers)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs the comparison and prints a Markdown table of medians. Returns
/// false if a run failed verification (an error reply, or a get that missed
/// one of the stored keys).
pub fn compare(a: &CompareArgs) -> io::Result<bool> {
    println!("{}", report::machine());
    let servers = start_servers(a)?;
    let mut verified = true;
    let keys_of = |d: Dist| match d {
        Dist::Uniform => a.uniform_keys.unwrap_or(a.workload.keys),
        Dist::Zipf => a.zipf_keys.unwrap_or(a.workload.keys),
    };
    let keys = a.dists.iter().map(|&d| keys_of(d)).max().unwrap_or(a.workload.keys);
    for s in &servers {
        let t0 = Instant::now();
        driver::prefill(s.addr, keys, a.workload.value_size)?;
        eprintln!("{}: stored {keys} keys in {:.1} s", s.name, t0.elapsed().as_secs_f64());
    }
    let mut cases: Vec<(Workload, Vec<Vec<RunResult>>)> = Vec::new();
    for &dist in &a.dists {
        for &set_ratio in &a.set_ratios {
            let w = Workload { dist, set_ratio, keys: keys_of(dist), ..a.workload.clone() };
            cases.push((w, vec![Vec::new(); servers.len()]));
        }
    }
    for run in 0..a.runs {
        for (w, results) in &mut cases {
            for k in 0..servers.len() {
                // Rotate which server goes first.
                let i = (k + run) % servers.len();
                let s = &servers[i];
                let r = driver::run(s.addr, w)?;
                eprintln!(
                    "run {} {} {} sets {:.0}%: {}",
                    run + 1,
                    s.name,
                    w.dist,
                    w.set_ratio * 100.0,
                    report::summary(&r)
                );
                if let Some(path) = &a.csv {
                    report::append_csv(path, &[report::csv_row("compare", &s.name, a.server_threads, w, &r)])?;
                }
                if let Some(problem) = report::verify(&r) {
                    eprintln!("verification failed for {}: {problem}", s.name);
                    verified = false;
                }
                results[i].push(r);
            }
        }
    }
    let w0 = &a.workload;
    println!(
        "\n{}; servers: -t {} -m {}; client: {} threads x {} conns x depth {}, {} B values, {} s runs (after {} s warm-up), medians of {}\n",
        report::machine(),
        a.server_threads,
        a.memory_mb,
        w0.threads,
        w0.conns,
        w0.depth,
        w0.value_size,
        w0.duration,
        w0.warmup,
        a.runs
    );
    let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
    let mut head = String::from("| keys | sets |");
    let mut rule = String::from("|---|---|");
    for (i, n) in names.iter().enumerate() {
        head.push_str(&format!(" {n} ops/s |"));
        rule.push_str("---|");
        if i > 0 {
            head.push_str(&format!(" {n} / memcached |"));
            rule.push_str("---|");
        }
    }
    for n in &names {
        head.push_str(&format!(" {n} p50 / p99 µs |"));
        rule.push_str("---|");
    }
    println!("{head}\n{rule}");
    for (w, results) in &cases {
        let ops: Vec<f64> = results.iter().map(|rs| median(rs.iter().map(RunResult::ops_per_sec).collect())).collect();
        let p50: Vec<f64> =
            results.iter().map(|rs| median(rs.iter().map(|r| r.percentile_us(50.0)).collect())).collect();
        let p99: Vec<f64> =
            results.iter().map(|rs| median(rs.iter().map(|r| r.percentile_us(99.0)).collect())).collect();
        let mut row = format!("| {} {} | {:.0}% |", w.keys, w.dist, w.set_ratio * 100.0);
        for i in 0..ops.len() {
            row.push_str(&format!(" {:.0} |", ops[i]));
            if i > 0 {
                row.push_str(&format!(" {:.2} |", ops[i] / ops[0]));
            }
        }
        for i in 0..ops.len() {
            row.push_str(&format!(" {:.0} / {:.0} |", p50[i], p99[i]));
        }
        println!("{row}");
    }
    drop(servers);
    Ok(verified)
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
