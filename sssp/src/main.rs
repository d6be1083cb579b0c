//! `gossamer-sssp`: single-source shortest paths on Graph500 Kronecker
//! graphs, by delegation over every thread of a Gossamer program, beside a
//! sequential Dijkstra and a `rayon` delta-stepping on the same graph.
//!
//! ```text
//! gossamer-sssp run --scale 18 --edgefactor 16 --roots 8            # one process, every core
//! gossamer-sssp run --scale 18 --threads 4 --processes 2            # two processes of this host
//! gossamer-sssp generate --scale 20 --out g20.edges                 # an edge-list file for other programs
//! gossamer-sssp run --graph g20.edges                               # search that file's graph
//! gossamer-sssp sweep --scale 18 --threads 1,2 --processes 1,2 --plot sssp.png
//! ```
//!
//! Every search is validated by the Graph500 rules; a failure exits with
//! status 1. `run` prints a line per root and, last, one
//! `result,<impl>,<processes>,<threads>,<scale>,<edgefactor>,<median_s>,<median_teps>`
//! line per implementation for scripts.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use gossamer_sssp::baseline::{dijkstra::dijkstra, rayon_delta::delta_stepping};
use gossamer_sssp::dist::{Graph, Phase, Source};
use gossamer_sssp::graph::{edgelist, Csr, Spec};
use gossamer_sssp::report::{self, Record, Summary};
use gossamer_sssp::{validate, Tree};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(name = "gossamer-sssp", version, about = "Single-source shortest paths by delegation, beside Graph500")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build the graph over the program, search from random roots, validate, report.
    Run(RunArgs),
    /// Write a Kronecker graph to an edge-list file.
    Generate(GenerateArgs),
    /// Run `run` for several thread and process counts; CSV and a plot of time against threads.
    Sweep(SweepArgs),
}

#[derive(Args, Debug, Clone)]
struct GraphArgs {
    /// log2 of the number of vertices.
    #[arg(long, default_value_t = 16)]
    scale: u32,
    /// Edges per vertex (Graph500: 16; the Gossamer thesis: 32).
    #[arg(long, default_value_t = 16)]
    edgefactor: u32,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Read the graph from this edge-list file instead of generating it
    /// (the same path must exist on every host).
    #[arg(long, conflicts_with_all = ["scale", "edgefactor"])]
    graph: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
struct SearchArgs {
    /// Random roots (vertices of degree > 0) to search from.
    #[arg(long, default_value_t = 8)]
    roots: usize,
    /// Seed of the root choice.
    #[arg(long, default_value_t = 2)]
    root_seed: u64,
    /// Bucket width of delta-stepping.
    #[arg(long, default_value_t = 0.1)]
    delta: f32,
    /// Baselines run on the same graph in rank 0: all, none, dijkstra or rayon.
    #[arg(long, default_value = "all")]
    baselines: String,
    /// Append one row per root and implementation to this CSV file.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
    /// Lengthen one vertex's distance after each search (checks that a
    /// wrong result fails validation and the run).
    #[arg(long, hide = true)]
    corrupt: bool,
}

#[derive(Args, Debug, Clone)]
struct RunArgs {
    #[command(flatten)]
    graph: GraphArgs,
    #[command(flatten)]
    search: SearchArgs,
    /// Worker threads of the whole program (spread over its processes).
    #[arg(long)]
    threads: Option<usize>,
    /// Processes of this host to run the program on (ignored when a
    /// launcher — gossamer run, srun, mpirun — started it).
    #[arg(long, default_value_t = 1)]
    processes: usize,
}

#[derive(Args, Debug, Clone)]
struct GenerateArgs {
    #[command(flatten)]
    graph: GraphArgs,
    /// The file to write.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args, Debug, Clone)]
struct SweepArgs {
    #[command(flatten)]
    graph: GraphArgs,
    #[command(flatten)]
    search: SearchArgs,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Process counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    processes: Vec<usize>,
    /// Where to draw time against threads.
    #[arg(long, default_value = "results/sssp_threads.png")]
    plot: PathBuf,
}

static RUN: OnceLock<RunArgs> = OnceLock::new();

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run(args) => run(args),
        Cmd::Generate(args) => generate(args),
        Cmd::Sweep(args) => sweep(args),
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn source(g: &GraphArgs) -> Source {
    match &g.graph {
        Some(p) => Source::File(p.clone()),
        None => Source::Kronecker(Spec::new(g.scale, g.edgefactor, g.seed)),
    }
}

fn generate(args: GenerateArgs) -> ExitCode {
    let spec = Spec::new(args.graph.scale, args.graph.edgefactor, args.graph.seed);
    let t = Instant::now();
    let pb = bar(false, spec.edges(), "edges");
    let written = edgelist::write_spec_with(&args.out, &spec, |done| pb.set_position(done));
    pb.finish_and_clear();
    match written {
        Ok(h) => {
            println!(
                "wrote {} vertices, {} edges to {} in {:.2} s",
                h.vertices,
                h.edges,
                args.out.display(),
                t.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gossamer-sssp: {}", gossamer_sssp::dist::build::file_error(&args.out, e));
            ExitCode::FAILURE
        }
    }
}

fn run(args: RunArgs) -> ExitCode {
    if args.search.roots == 0 {
        eprintln!("gossamer-sssp: --roots must be at least 1");
        return ExitCode::FAILURE;
    }
    if !matches!(args.search.baselines.as_str(), "all" | "none" | "dijkstra" | "rayon") {
        eprintln!("gossamer-sssp: --baselines is all, none, dijkstra or rayon, not {:?}", args.search.baselines);
        return ExitCode::FAILURE;
    }
    let threads = args.threads.unwrap_or_else(cores).max(1);
    if args.processes > 1 && std::env::var_os("GOSSAMER_PROCESSES").is_none() {
        // Read by gossamer::main when no launcher set the rank (the child
        // ranks it starts have theirs and ignore this).
        std::env::set_var("GOSSAMER_PROCESSES", args.processes.to_string());
    }
    RUN.set(args).expect("set once");
    gossamer::main(gsm_main, threads);
    ExitCode::SUCCESS
}

fn bar(quiet: bool, len: u64, prefix: &'static str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {elapsed_precise} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_prefix(prefix);
    pb
}

/// Rank 0's program.
fn gsm_main() {
    let args = RUN.get().expect("arguments parsed before the program started").clone();
    match program(&args) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("gossamer-sssp: {e}");
            // Fate sharing takes the other ranks down with us.
            gossamer::rack::exit_now(1);
        }
    }
}

fn program(args: &RunArgs) -> Result<(), String> {
    let topo = gossamer::topology();
    let (threads, processes) = (topo.threads(), topo.processes.len());
    let source = source(&args.graph);
    let (vertices, edges) = source.size()?;
    let (scale, edgefactor) = match &source {
        Source::Kronecker(s) => (s.scale, s.edgefactor),
        Source::File(p) => {
            let h = edgelist::read_header(p).map_err(|e| gossamer_sssp::dist::build::file_error(p, e))?;
            (h.scale, (h.edges / h.vertices.max(1)) as u32)
        }
    };
    println!(
        "gossamer-sssp: {vertices} vertices, {edges} edges (scale {scale}, edge factor {edgefactor}); {threads} threads \
         in {processes} process{} on {} host{}",
        if processes == 1 { "" } else { "es" },
        topo.hosts.len(),
        if topo.hosts.len() == 1 { "" } else { "s" }
    );
    let q = args.search.quiet;
    let pb = bar(q, 3, "construction");
    let t = Instant::now();
    let mut marks = Vec::new();
    let g = Graph::build(&source, |phase| {
        marks.push(t.elapsed());
        pb.inc(1);
        pb.set_message(match phase {
            Phase::Entrusted => "generating",
            Phase::Generated => "building CSR",
            Phase::Built => "built",
        });
    })
    .map_err(|e| e.to_string())?;
    pb.finish_and_clear();
    let (gen_s, build_s) = ((marks[1] - marks[0]).as_secs_f64(), (marks[2] - marks[1]).as_secs_f64());
    println!(
        "graph: generated and routed in {gen_s:.2} s, CSR built in {build_s:.2} s; {} arcs, {:.1} MiB in all parts \
         ({:.1} bytes per input edge)",
        g.arcs,
        g.bytes as f64 / (1u64 << 20) as f64,
        g.bytes as f64 / edges.max(1) as f64
    );
    let roots = g.roots(args.search.roots, args.search.root_seed).map_err(|e| e.to_string())?;

    // The baselines' graph: the whole CSR in this process.
    let baselines = &args.search.baselines;
    let want = |b: &str| baselines == "all" || baselines == b;
    let whole = if want("dijkstra") || want("rayon") {
        let t = Instant::now();
        let src = source.clone();
        let csr = off_fiber(move || -> Result<Csr, String> {
            let all = src.edges(0..edges)?;
            Ok(Csr::from_edges(0, vertices as u32, &all))
        })?;
        println!("baselines: whole CSR in rank 0 built in {:.2} s", t.elapsed().as_secs_f64());
        Some(std::sync::Arc::new(csr))
    } else {
        None
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| e.to_string())?;
    let pool = std::sync::Arc::new(pool);

    let pb = bar(q, roots.len() as u64, "roots");
    let mut records: Vec<Record> = Vec::new();
    let record = |implementation: &str, threads: usize, processes: usize, root: u32, d: Duration, edges: u64| Record {
        implementation: implementation.into(),
        processes,
        threads,
        scale,
        edgefactor,
        root,
        seconds: d.as_secs_f64(),
        edges,
    };
    let delta = args.search.delta;
    // Warm-up, as the Graph500 reference does: one search, not timed.
    g.search(roots[0], delta);
    for &root in &roots {
        let t = Instant::now();
        let stats = g.search(root, delta);
        let took = t.elapsed();
        if args.search.corrupt {
            g.perturb(root, 0.5);
        }
        let t = Instant::now();
        let component = g.validate(root).map_err(|e| e.to_string())?;
        let mut line = format!(
            "root {root:>10}: gossamer {:>9.4} s {:>10.3e} TEPS ({} buckets, {} rounds, {} expansions, {} relaxations \
             sent, {} dropped; validated in {:.2} s)",
            took.as_secs_f64(),
            component as f64 / took.as_secs_f64(),
            stats.buckets,
            stats.rounds,
            stats.expansions,
            stats.relaxations_sent,
            stats.relaxations_dropped,
            t.elapsed().as_secs_f64()
        );
        records.push(record("gossamer", threads, processes, root, took, component));
        if let Some(csr) = &whole {
            let ours = g.gather();
            let (csr, pool) = (csr.clone(), pool.clone());
            let (want_d, want_r) = (want("dijkstra"), want("rayon"));
            let runs = off_fiber(move || -> Result<Vec<(&'static str, Duration)>, String> {
                let mut runs = Vec::new();
                let mut check = |name: &'static str, t: Duration, tree: Tree| -> Result<(), String> {
                    let e = validate::validate(&csr, root, &tree).map_err(|e| format!("{name} from {root}: {e}"))?;
                    if e != component {
                        return Err(format!(
                            "{name} from {root}: {e} edges in the component, gossamer found {component}"
                        ));
                    }
                    if tree.dist != ours.dist {
                        let v = (0..tree.dist.len()).find(|&v| tree.dist[v] != ours.dist[v]).unwrap_or(0);
                        return Err(format!(
                            "{name} and gossamer disagree from root {root}: vertex {v} at {} and {}",
                            tree.dist[v], ours.dist[v]
                        ));
                    }
                    runs.push((name, t));
                    Ok(())
                };
                if want_d {
                    let t = Instant::now();
                    let tree = dijkstra(&csr, root);
                    check("dijkstra", t.elapsed(), tree)?;
                }
                if want_r {
                    let t = Instant::now();
                    let tree = pool.install(|| delta_stepping(&csr, root, delta));
                    check("rayon", t.elapsed(), tree)?;
                }
                Ok(runs)
            })?;
            for (name, t) in runs {
                let th = if name == "dijkstra" { 1 } else { threads };
                line.push_str(&format!("; {name} {:.4} s", t.as_secs_f64()));
                records.push(record(name, th, 1, root, t, component));
            }
            line.push_str("; distances agree");
        }
        pb.suspend(|| println!("{line}"));
        pb.inc(1);
    }
    pb.finish_and_clear();
    drop(g);

    println!("{:<10} {:>10} {:>8} {:>14} {:>12}", "median of", "processes", "threads", "s per root", "TEPS");
    let mut summaries = Vec::new();
    for name in ["gossamer", "dijkstra", "rayon"] {
        let mine: Vec<Record> = records.iter().filter(|r| r.implementation == name).cloned().collect();
        if let Some(s) = Summary::of(&mine) {
            println!("{:<10} {:>10} {:>8} {:>14.4} {:>12.3e}", name, s.processes, s.threads, s.seconds, s.teps);
            summaries.push(s);
        }
    }
    if let Some(d) = summaries.iter().find(|s| s.implementation == "dijkstra") {
        println!("speed-up of gossamer over sequential Dijkstra: {:.2}x", d.seconds / summaries[0].seconds);
    }
    if let Some(r) = summaries.iter().find(|s| s.implementation == "rayon") {
        println!("gossamer time / rayon time: {:.2}", summaries[0].seconds / r.seconds);
    }
    for s in &summaries {
        println!("{}", s.result_line(scale, edgefactor));
    }
    if let Some(path) = &args.search.csv {
        report::append_csv(path, &records).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Runs `f` on a thread of its own and waits (a fiber's stack is small,
/// and the baselines would also keep a worker from its other fibers).
fn off_fiber<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new()
        .name("sssp-baseline".into())
        .stack_size(64 << 20)
        .spawn(f)
        .expect("start a thread")
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

fn sweep(args: SweepArgs) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("gossamer-sssp: cannot find our executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut summaries = Vec::new();
    let (mut scale, mut ef) = (args.graph.scale, args.graph.edgefactor);
    for &p in &args.processes {
        for &t in &args.threads {
            if t < p {
                continue;
            }
            let mut cmd = std::process::Command::new(&exe);
            cmd.arg("run").arg("--threads").arg(t.to_string()).arg("--processes").arg(p.to_string());
            match &args.graph.graph {
                Some(g) => cmd.arg("--graph").arg(g),
                None => cmd
                    .args(["--scale", &args.graph.scale.to_string()])
                    .args(["--edgefactor", &args.graph.edgefactor.to_string()])
                    .args(["--seed", &args.graph.seed.to_string()]),
            };
            cmd.args(["--roots", &args.search.roots.to_string()])
                .args(["--root-seed", &args.search.root_seed.to_string()])
                .args(["--delta", &args.search.delta.to_string()])
                .args(["--baselines", &args.search.baselines])
                .arg("--quiet");
            if let Some(c) = &args.search.csv {
                cmd.arg("--csv").arg(c);
            }
            cmd.env_remove("GOSSAMER_PROCESSES");
            eprintln!("sweep: {p} process(es), {t} thread(s)");
            let out = match cmd.stderr(std::process::Stdio::inherit()).output() {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("gossamer-sssp: cannot run {}: {e}", exe.display());
                    return ExitCode::FAILURE;
                }
            };
            let text = String::from_utf8_lossy(&out.stdout);
            print!("{text}");
            if !out.status.success() {
                eprintln!("gossamer-sssp: the run with {p} process(es) and {t} thread(s) failed ({})", out.status);
                return ExitCode::FAILURE;
            }
            for line in text.lines() {
                if let Some(mut s) = Summary::parse_result_line(line) {
                    if s.implementation == "dijkstra" {
                        // Sequential: drawn flat across the thread counts.
                        s.threads = t;
                    }
                    let f: Vec<&str> = line.split(',').collect();
                    scale = f[4].parse().unwrap_or(scale);
                    ef = f[5].parse().unwrap_or(ef);
                    // One baseline line per thread count is enough.
                    if s.implementation == "gossamer" || p == args.processes[0] {
                        summaries.push(s);
                    }
                }
            }
        }
    }
    let title = format!("SSSP, Kronecker scale {scale}, edge factor {ef}: median time per root");
    if let Err(e) = report::plot_time_vs_threads(&args.plot, &title, &summaries) {
        eprintln!("gossamer-sssp: {e}");
        return ExitCode::FAILURE;
    }
    println!("plot: {}", args.plot.display());
    ExitCode::SUCCESS
}
