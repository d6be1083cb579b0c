//! Text-protocol commands: one delegated request per key or item, replies
//! in command order.

use std::rc::Rc;

use super::{issue, Env, Flow};
use crate::clock;
use crate::protocol::text::{replies, Command, StatsKind, TextKind};
use crate::server::admin::{commands, hooks};
use crate::server::agent::AgentOp;
use crate::server::local::ConnShared;
use crate::server::outq::{Ctx, Reply};
use crate::server::report::{self, TextSink, Totals, VERSION};
use crate::server::shards::Scope;
use crate::server::shared::bump;
use crate::store::{Op, StoreMode};

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
            issue(env, conn, shards.of(key), op, ctx(TextKind::Arith, noreply));
        }
        Command::Touch { key, exptime, noreply } => {
            let op = Op::Get { key: key.to_vec(), touch: Some(i64::from(exptime)), value: false };
            issue(env, conn, shards.of(key), op, ctx(TextKind::Touch, noreply));
        }
        Command::FlushAll { delay, noreply } => {
            bump(&env.counters.cmd_flush, 1);
            let delay = clock::absolute(i64::from(delay));
            shards.broadcast(conn, Scope::All, Some(Op::Flush { delay }), Some(AgentOp::Flush(delay)), move |_| {
                if noreply {
                    Reply::Nothing
                } else {
                    Reply::Static(replies::OK)
                }
            });
        }
        Command::Stats(StatsKind::Reset) => {
            shards.broadcast(conn, Scope::All, Some(Op::Stats { reset: true }), Some(AgentOp::Reset), move |_| {
                Reply::Static(RESET)
            });
        }
        Command::Stats(kind @ (StatsKind::Settings | StatsKind::Conns)) => {
            conn.push(Reply::Bytes(report::write(TextSink::default(), kind, env.shared, &Totals::default())));
        }
        Command::Stats(StatsKind::Process(rank)) if rank as usize >= shards.processes() => {
            conn.push(Reply::Bytes(
                format!("CLIENT_ERROR no process {rank}: the program has {}\r\n", shards.processes()).into_bytes(),
            ));
        }
        Command::Stats(kind) => {
            let shared = env.shared.clone();
            let (scope, agent_op) = match kind {
                StatsKind::Process(r) => (Scope::Rank(r as usize), Some(AgentOp::Stats)),
                StatsKind::General => (Scope::All, Some(AgentOp::Stats)),
                _ => (Scope::All, None),
            };
            shards.broadcast(conn, scope, Some(Op::Stats { reset: false }), agent_op, move |g| {
                Reply::Bytes(report::write(TextSink::default(), kind, &shared, &Totals::gather(g, scope)))
            });
        }
        Command::Version => conn.push(Reply::Bytes(format!("VERSION {VERSION}\r\n").into_bytes())),
        Command::Verbosity { level, noreply } => {
            shards.broadcast(conn, Scope::All, None, Some(AgentOp::Verbosity(level)), move |_| {
                if noreply {
                    Reply::Nothing
                } else {
                    Reply::Static(replies::OK)
                }
            });
        }
        Command::Quit => {
            conn.push(Reply::Close);
            return Flow::Stop;
        }
        Command::Close => {
            conn.push(Reply::CloseError);
            return Flow::Stop;
        }
        Command::Meta(m) => super::meta::meta(env, conn, m),
        Command::Lru(a) => super::lru::lru(env, conn, a),
        Command::Admin { cmd, noreply } => return commands::text(env, conn, cmd, noreply),
        Command::Reply { text, noreply } => {
            if !noreply {
                conn.push(Reply::Static(text));
            }
        }
    }
    Flow::Continue
}
