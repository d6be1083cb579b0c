//! A small tokio TCP service whose state lives in trusts: a counter store
//! spoken in lines.
//!
//! ```text
//! INCR <key> [n]   add n (default 1) to a counter; answers its new value
//! GET <key>        answers the counter (0 if it was never set)
//! SUM              answers the total of all counters
//! KEYS             answers how many counters there are
//! QUIT             closes the connection
//! ```
//!
//! The counters are spread over shards, each a `Trust<HashMap<String, i64>>`
//! on one of gossamer's trustees. Connection tasks run on tokio's
//! multi-thread runtime and never lock anything: each command is a closure
//! sent to the shard's trustee with `apply_with_async`, whose future the
//! task awaits. `SUM` sends one request to every shard first and awaits
//! them after, so they are all in flight at once.
//!
//! ```text
//! cargo run --release --example tokio_service -- --addr 127.0.0.1:7070
//! printf 'INCR apples 3\nINCR apples\nGET apples\nSUM\nQUIT\n' | nc 127.0.0.1 7070
//! cargo run --release --example tokio_service -- --self-test
//! ```
//!
//! `--self-test` starts the service on a free loopback port, runs a few
//! dozen concurrent clients against it (one of them pipelining), checks
//! every total, prints `self-test passed` and exits 0 (1 on any mismatch).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use gossamer::Trust;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

type Shard = HashMap<String, i64>;

/// The service's state: counters spread over shards, each owned by a
/// trustee. Cloning is cheap (one `Arc`).
#[derive(Clone)]
pub struct Store {
    shards: Arc<[Trust<Shard>]>,
}

impl Store {
    /// `shards` empty maps, entrusted round-robin to the runtime's trustees.
    pub fn new(handle: &gossamer::Handle, shards: usize) -> Store {
        Store { shards: (0..shards.max(1)).map(|_| handle.entrust(Shard::new())).collect() }
    }

    fn shard(&self, key: &str) -> &Trust<Shard> {
        // std's default hasher with fixed keys: the same shard every run.
        let mut h = std::hash::DefaultHasher::new();
        key.hash(&mut h);
        &self.shards[(h.finish() % self.shards.len() as u64) as usize]
    }

    pub async fn incr(&self, key: String, by: i64) -> i64 {
        self.shard(&key)
            .apply_with_async(
                |m, (key, by): (String, i64)| {
                    let v = m.entry(key).or_insert(0);
                    *v += by;
                    *v
                },
                (key, by),
            )
            .await
    }

    pub async fn get(&self, key: String) -> i64 {
        self.shard(&key).apply_with_async(|m, key: String| m.get(&key).copied().unwrap_or(0), key).await
    }

    /// The total over all shards: every request is issued before the first
    /// is awaited.
    pub async fn sum(&self) -> i64 {
        let parts: Vec<_> = self.shards.iter().map(|s| s.apply_async(|m| m.values().sum::<i64>())).collect();
        let mut total = 0;
        for p in parts {
            total += p.await;
        }
        total
    }

    pub async fn keys(&self) -> usize {
        let parts: Vec<_> = self.shards.iter().map(|s| s.apply_async(|m| m.len())).collect();
        let mut n = 0;
        for p in parts {
            n += p.await;
        }
        n
    }

    /// Answers one command line; `None` closes the connection.
    pub async fn command(&self, line: &str) -> Option<String> {
        let mut words = line.split_whitespace();
        let reply = match (words.next().map(str::to_ascii_uppercase).as_deref(), words.next(), words.next()) {
            (Some("INCR"), Some(key), by) => match by.map_or(Ok(1), str::parse::<i64>) {
                Ok(by) => self.incr(key.to_string(), by).await.to_string(),
                Err(_) => "ERR the increment must be an integer".to_string(),
            },
            (Some("GET"), Some(key), None) => self.get(key.to_string()).await.to_string(),
            (Some("SUM"), None, None) => self.sum().await.to_string(),
            (Some("KEYS"), None, None) => self.keys().await.to_string(),
            (Some("QUIT"), None, None) => return None,
            (None, _, _) => "ERR empty line".to_string(),
            _ => "ERR unknown command (INCR key [n], GET key, SUM, KEYS, QUIT)".to_string(),
        };
        Some(reply)
    }
}

/// Serves one connection until it says QUIT or closes.
async fn serve_connection(stream: TcpStream, store: Store) -> std::io::Result<()> {
    let (rd, mut wr) = stream.into_split();
    let mut lines = BufReader::new(rd).lines();
    while let Some(line) = lines.next_line().await? {
        match store.command(&line).await {
            Some(mut reply) => {
                reply.push('\n');
                wr.write_all(reply.as_bytes()).await?;
            }
            None => break,
        }
    }
    Ok(())
}

/// Accepts connections for ever, one task each.
pub async fn serve(listener: TcpListener, store: Store) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let store = store.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_connection(stream, store).await {
                eprintln!("connection: {e}");
            }
        });
    }
}

/// One client: `ops` increments of 1 over 20 keys, one line at a time, or
/// all written before any answer is read (`pipelined`).
async fn client(addr: std::net::SocketAddr, id: usize, ops: usize, pipelined: bool) -> std::io::Result<()> {
    let stream = TcpStream::connect(addr).await?;
    let (rd, mut wr) = stream.into_split();
    let mut lines = BufReader::new(rd).lines();
    let key = |i: usize| format!("key{}", (id * 7 + i) % 20);
    let bad = |what: String| std::io::Error::other(what);
    if pipelined {
        let mut all = String::new();
        for i in 0..ops {
            all.push_str(&format!("INCR {}\n", key(i)));
        }
        wr.write_all(all.as_bytes()).await?;
        for _ in 0..ops {
            let l = lines.next_line().await?.ok_or_else(|| bad("connection closed early".into()))?;
            l.parse::<i64>().map_err(|_| bad(format!("not a number: {l}")))?;
        }
    } else {
        for i in 0..ops {
            wr.write_all(format!("INCR {}\n", key(i)).as_bytes()).await?;
            let l = lines.next_line().await?.ok_or_else(|| bad("connection closed early".into()))?;
            l.parse::<i64>().map_err(|_| bad(format!("not a number: {l}")))?;
        }
    }
    wr.write_all(b"QUIT\n").await?;
    Ok(())
}

/// Sends `cmd` on a fresh connection and returns the answer.
async fn ask(addr: std::net::SocketAddr, cmd: &str) -> std::io::Result<String> {
    let stream = TcpStream::connect(addr).await?;
    let (rd, mut wr) = stream.into_split();
    wr.write_all(format!("{cmd}\nQUIT\n").as_bytes()).await?;
    let mut lines = BufReader::new(rd).lines();
    lines.next_line().await?.ok_or_else(|| std::io::Error::other("no answer"))
}

/// Starts the service on a free loopback port, runs `clients` concurrent
/// clients of `ops` increments each, and checks the totals.
pub fn self_test(workers: usize, shards: usize, clients: usize, ops: usize) -> Result<String, String> {
    let rt = gossamer::Runtime::builder().workers(workers).build().map_err(|e| e.to_string())?;
    let store = Store::new(&rt.handle(), shards);
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let report = tokio_rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let server = tokio::spawn(serve(listener, store.clone()));
        let work = async {
            let tasks: Vec<_> = (0..clients).map(|id| tokio::spawn(client(addr, id, ops, id == 0))).collect();
            for t in tasks {
                t.await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
            }
            let sum: i64 = ask(addr, "SUM").await.map_err(|e| e.to_string())?.parse().map_err(|_| "bad SUM")?;
            let keys: usize = ask(addr, "KEYS").await.map_err(|e| e.to_string())?.parse().map_err(|_| "bad KEYS")?;
            let mut by_key = 0;
            for k in 0..20 {
                let v: i64 = ask(addr, &format!("GET key{k}"))
                    .await
                    .map_err(|e| e.to_string())?
                    .parse()
                    .map_err(|_| "bad GET")?;
                by_key += v;
            }
            let unknown = ask(addr, "FROB").await.map_err(|e| e.to_string())?;
            Ok::<_, String>((sum, keys, by_key, unknown))
        };
        let (sum, keys, by_key, unknown) =
            tokio::time::timeout(Duration::from_secs(60), work).await.map_err(|_| "timed out".to_string())??;
        server.abort();
        let want = (clients * ops) as i64;
        if sum != want || by_key != want || keys != 20.min(clients * ops) || !unknown.starts_with("ERR") {
            return Err(format!(
                "mismatch: SUM {sum}, GETs {by_key}, KEYS {keys} (want {want}, 20), FROB -> {unknown}"
            ));
        }
        Ok(format!(
            "{clients} clients x {ops} INCRs over {shards} shards on {workers} trustees: SUM {sum}, KEYS {keys}"
        ))
    })?;
    drop(tokio_rt);
    let sd = rt.shutdown();
    if !sd.clean {
        return Err(format!("gossamer shutdown was not clean: {sd:?}"));
    }
    Ok(report)
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|_| panic!("bad value for {name}: {v}")))
        .unwrap_or(default)
}

#[allow(dead_code)] // also compiled into the tests, which call `self_test`
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workers = arg(&args, "--workers", 2usize);
    let shards = arg(&args, "--shards", 8usize);
    if args.iter().any(|a| a == "--self-test") {
        let clients = arg(&args, "--clients", 32usize);
        let ops = arg(&args, "--ops", 200usize);
        match self_test(workers, shards, clients, ops) {
            Ok(report) => println!("self-test passed: {report}"),
            Err(e) => {
                eprintln!("self-test FAILED: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let addr: String = arg(&args, "--addr", "127.0.0.1:7070".to_string());
    let rt = gossamer::Runtime::builder().workers(workers).build().expect("gossamer runtime");
    let store = Store::new(&rt.handle(), shards);
    let tokio_rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    tokio_rt.block_on(async move {
        let listener = TcpListener::bind(&addr).await.unwrap_or_else(|e| panic!("cannot listen on {addr}: {e}"));
        println!("counter service on {addr} ({shards} shards on {workers} gossamer trustees); try: INCR apples 3");
        serve(listener, store).await.expect("accept failed");
    });
}
