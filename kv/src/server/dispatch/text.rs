//! Text-protocol commands: one delegated request per key or item, replies
//! in command order.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use super::{issue, Env, Flow};
use crate::protocol::text::{replies, Command, StatsKind, TextKind};
use crate::server::admin::{commands, hooks};
use crate::server::local::ConnShared;
use crate::server::outq::{Ctx, Reply};
use crate::server::report::{self, TextSink, VERSION};
use crate::server::shared::bump;
use crate::store::{Op, Outcome, ShardStats, StoreMode};

const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
const RESET: &[u8] = b"RESET\r\n";

fn ctx(kind: TextKind, noreply: bool) -> Ctx {
    if noreply {
        Ctx::Silent
    } else {
        Ctx::Text(kind)
    }
}

/// Handles one text command.
pub fn text(env: &Env<'_>, conn: &Rc<ConnShared>, cmd: Command<'_>) -> Flow {
    let shards = env.shards;
    match cmd {
        Command::Get { keys, cas, touch } => {
            for key in keys.split(|&b| b == b' ').filter(|k| !k.is_empty()) {
                let op = Op::Get { key: key.to_vec(), touch: touch.map(i64::from), value: true };
                issue(env, conn, shards.of(key), op, Ctx::Text(TextKind::Get { cas }));
            }
            conn.push(Reply::Static(replies::END));
        }
        Command::Store { mode, key, flags, exptime, cas, data, noreply } => {
            let op =
                Op::Store { mode, key: key.to_vec(), flags, exptime: i64::from(exptime), cas, data: data.to_vec() };
            issue(env, conn, shards.of(key), op, ctx(TextKind::Store, noreply));
        }
        Command::TooLarge { key, unlink, noreply } => {
            bump(&env.counters.store_too_large, 1);
            hooks::too_large(env, conn, key, unlink.then_some(StoreMode::Set));
            if unlink {
                // memcached drops the old item rather than keep stale data.
                shards.issue(conn, shards.of(key), Op::Unlink { key: key.to_vec() }, Ctx::Silent);
            }
            if !noreply {
                conn.push(Reply::Static(TOO_LARGE));
            }
        }
        Command::Delete { key, noreply } => {
            issue(env, conn, shards.of(key), Op::Delete { key: key.to_vec(), cas: 0 }, ctx(TextKind::Delete, noreply));
        }
        Command::Arith { key, incr, delta, noreply } => {
            let op = Op::Arith { key: key.to_vec(), incr, delta, create: None, cas: 0 };
            shards.issue(conn, shards.of(key), op, ctx(TextKind::Arith, noreply));
        }
        Command::Touch { key, exptime, noreply } => {
            let op = Op::Get { key: key.to_vec(), touch: Some(i64::from(exptime)), value: false };
            issue(env, conn, shards.of(key), op, ctx(TextKind::Touch, noreply));
        }
        Command::FlushAll { delay, noreply } => {
            bump(&env.counters.cmd_flush, 1);
            let delay = i64::from(delay);
            env.shared.note_flush(delay);
            shards.broadcast(
                conn,
                || Op::Flush { delay },
                move |_| if noreply { Reply::Nothing } else { Reply::Static(replies::OK) },
            );
        }
        Command::Stats(StatsKind::Reset) => {
            env.shared.admin.detail.clear();
            let shared = env.shared.clone();
            shards.broadcast(
                conn,
                || Op::Stats { reset: true },
                move |_| {
                    shared.reset_counters();
                    Reply::Static(RESET)
                },
            );
        }
        Command::Stats(kind @ (StatsKind::Settings | StatsKind::Conns)) => {
            conn.push(Reply::Bytes(report::write(TextSink::default(), kind, env.shared, &ShardStats::default())));
        }
        Command::Stats(kind) => {
            let shared = env.shared.clone();
            shards.broadcast(
                conn,
                || Op::Stats { reset: false },
                move |outs| Reply::Bytes(report::write(TextSink::default(), kind, &shared, &gathered(outs))),
            );
        }
        Command::Version => conn.push(Reply::Bytes(format!("VERSION {VERSION}\r\n").into_bytes())),
        Command::Verbosity { level, noreply } => {
            set_verbosity(env, level);
            if !noreply {
                conn.push(Reply::Static(replies::OK));
            }
        }
        Command::Quit | Command::Close => {
            conn.push(Reply::Close);
            return Flow::Stop;
        }
        Command::Admin { cmd, noreply } => return commands::text(env, conn, cmd, noreply),
        Command::Reply { text, noreply } => {
            if !noreply {
                conn.push(Reply::Static(text));
            }
        }
    }
    Flow::Continue
}

/// Sums shard stats outcomes.
pub fn gathered(outs: Vec<Outcome>) -> ShardStats {
    let stats: Vec<ShardStats> = outs
        .into_iter()
        .filter_map(|o| match o {
            Outcome::Stats(s) => Some(*s),
            _ => None,
        })
        .collect();
    report::sum(&stats)
}

/// Applies `verbosity <n>` (kept for `stats settings`).
fn set_verbosity(env: &Env<'_>, level: u32) {
    env.shared.verbosity.store(level, Ordering::Relaxed);
}
