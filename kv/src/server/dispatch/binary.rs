//! Binary-protocol requests.

use std::rc::Rc;

use super::{issue, Env, Flow};
use crate::clock;
use crate::protocol::binary::reply as bin_reply;
use crate::protocol::binary::{opcode, stat_group, status, BinCtx, Frame, Header, StatGroup};
use crate::protocol::text::StatsKind;
use crate::server::admin::{commands, hooks};
use crate::server::agent::AgentOp;
use crate::server::local::ConnShared;
use crate::server::outq::{Ctx, Reply};
use crate::server::report::{self, BinSink, Totals, VERSION};
use crate::server::shards::Scope;
use crate::server::shared::bump;
use crate::store::{Op, StoreMode};

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

fn ctx_of(h: &Header) -> BinCtx {
    BinCtx { opcode: h.opcode, opaque: h.opaque }
}

fn error(conn: &ConnShared, h: &Header, st: u16) {
    let mut out = Vec::new();
    bin_reply::error(&mut out, ctx_of(h), st);
    conn.push(Reply::Bytes(out));
}

/// Handles one binary frame.
pub fn binary(env: &Env<'_>, conn: &Rc<ConnShared>, frame: Frame<'_>) -> Flow {
    let shards = env.shards;
    match frame {
        Frame::BadMagic => {
            conn.push(Reply::CloseError);
            Flow::Stop
        }
        Frame::Error { header, status, close } => {
            error(conn, &header, status);
            if close {
                conn.push(Reply::CloseError);
                return Flow::Stop;
            }
            Flow::Continue
        }
        Frame::TooLarge { header, key } => {
            bump(&env.counters.store_too_large, 1);
            hooks::too_large(env, conn, key, None);
            if opcode::unquiet(header.opcode).0 == opcode::SET {
                shards.issue(conn, shards.of(key), Op::Unlink { key: key.to_vec() }, Ctx::Silent);
            }
            error(conn, &header, status::E2BIG);
            Flow::Continue
        }
        Frame::Request { header, extras, key, value } => request(env, conn, &header, extras, key, value),
    }
}

fn request(env: &Env<'_>, conn: &Rc<ConnShared>, h: &Header, extras: &[u8], key: &[u8], value: &[u8]) -> Flow {
    let shards = env.shards;
    let ctx = ctx_of(h);
    let (op, quiet) = opcode::unquiet(h.opcode);
    let issue = |op: Op| issue(env, conn, shards.of(key), op, Ctx::Binary(ctx));
    match op {
        opcode::GET | opcode::GETK => issue(Op::Get { key: key.to_vec(), touch: None, value: true }),
        opcode::GAT | opcode::GATK => {
            issue(Op::Get { key: key.to_vec(), touch: Some(i64::from(be32(extras))), value: true })
        }
        opcode::TOUCH => issue(Op::Get { key: key.to_vec(), touch: Some(i64::from(be32(extras))), value: false }),
        opcode::SET | opcode::ADD | opcode::REPLACE => {
            let mode = match (op, h.cas) {
                (_, c) if c != 0 => StoreMode::Cas,
                (opcode::ADD, _) => StoreMode::Add,
                (opcode::REPLACE, _) => StoreMode::Replace,
                _ => StoreMode::Set,
            };
            let (flags, exptime) = (be32(extras), i64::from(be32(&extras[4..])));
            issue(Op::Store { mode, key: key.to_vec(), flags, exptime, cas: h.cas, data: value.to_vec() });
        }
        opcode::APPEND | opcode::PREPEND => {
            let mode = if op == opcode::APPEND { StoreMode::Append } else { StoreMode::Prepend };
            issue(Op::Store { mode, key: key.to_vec(), flags: 0, exptime: 0, cas: h.cas, data: value.to_vec() });
        }
        opcode::DELETE => issue(Op::Delete { key: key.to_vec(), cas: h.cas }),
        opcode::INCREMENT | opcode::DECREMENT => {
            let (delta, initial, exptime) = (be64(extras), be64(&extras[8..]), be32(&extras[16..]));
            let create = (exptime != u32::MAX).then_some((initial, i64::from(exptime)));
            issue(Op::Arith { key: key.to_vec(), incr: op == opcode::INCREMENT, delta, create, cas: h.cas });
        }
        opcode::QUIT => {
            if !quiet {
                let mut out = Vec::new();
                bin_reply::ok(&mut out, ctx, 0);
                conn.push(Reply::Bytes(out));
            }
            conn.push(Reply::Close);
            return Flow::Stop;
        }
        opcode::FLUSH => {
            bump(&env.counters.cmd_flush, 1);
            let delay = clock::absolute(if extras.len() == 4 { i64::from(be32(extras)) } else { 0 });
            shards.broadcast(conn, Scope::All, Some(Op::Flush { delay }), Some(AgentOp::Flush(delay)), move |_| {
                let mut out = Vec::new();
                if !quiet {
                    bin_reply::ok(&mut out, ctx, 0);
                }
                Reply::Bytes(out)
            });
        }
        opcode::NOOP => {
            let mut out = Vec::new();
            bin_reply::ok(&mut out, ctx, 0);
            conn.push(Reply::Bytes(out));
        }
        opcode::VERSION => {
            let mut out = Vec::new();
            bin_reply::with_value(&mut out, ctx, VERSION.as_bytes());
            conn.push(Reply::Bytes(out));
        }
        opcode::STAT => stat(env, conn, h, key),
        _ => error(conn, h, status::UNKNOWN_COMMAND),
    }
    Flow::Continue
}

fn stat(env: &Env<'_>, conn: &Rc<ConnShared>, h: &Header, key: &[u8]) {
    let ctx = ctx_of(h);
    let kind = match stat_group(key) {
        Some(StatGroup::General) => StatsKind::General,
        Some(StatGroup::Settings) => StatsKind::Settings,
        Some(StatGroup::Items) => StatsKind::Items,
        Some(StatGroup::Slabs) => StatsKind::Slabs,
        Some(StatGroup::Sizes) => StatsKind::Sizes,
        Some(StatGroup::Reset) => StatsKind::Reset,
        Some(g) if commands::binary_stat(env, conn, ctx, g) => return,
        _ => match key.strip_prefix(b"process ").and_then(|r| std::str::from_utf8(r).ok()?.parse().ok()) {
            Some(rank) => StatsKind::Process(rank),
            None => return error(conn, h, status::KEY_ENOENT),
        },
    };
    let shared = env.shared.clone();
    match kind {
        StatsKind::Reset => {
            env.shards.broadcast(conn, Scope::All, Some(Op::Stats { reset: true }), Some(AgentOp::Reset), move |_| {
                let mut out = Vec::new();
                bin_reply::stat(&mut out, ctx, b"", b"");
                Reply::Bytes(out)
            })
        }
        StatsKind::Settings => {
            conn.push(Reply::Bytes(report::write(BinSink::new(ctx), kind, env.shared, &Totals::default())));
        }
        StatsKind::Process(r) if r as usize >= env.shards.processes() => error(conn, h, status::KEY_ENOENT),
        _ => {
            let (scope, agent_op) = match kind {
                StatsKind::Process(r) => (Scope::Rank(r as usize), Some(AgentOp::Stats)),
                StatsKind::General => (Scope::All, Some(AgentOp::Stats)),
                _ => (Scope::All, None),
            };
            env.shards.broadcast(conn, scope, Some(Op::Stats { reset: false }), agent_op, move |g| {
                Reply::Bytes(report::write(BinSink::new(ctx), kind, &shared, &Totals::gather(g, scope)))
            })
        }
    }
}
