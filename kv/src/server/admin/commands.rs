//! The administrative commands of both protocols, answered as memcached
//! 1.6.18 answers them.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use super::slabs;
use super::watch::AddError;
use crate::protocol::binary::reply as bin_reply;
use crate::protocol::binary::{BinCtx, StatGroup};
use crate::protocol::text::admin::safe_strtod;
use crate::protocol::text::{replies, Admin, Detail};
use crate::server::dispatch::{Env, Flow};
use crate::server::local::ConnShared;
use crate::server::outq::Reply;
use crate::server::shards::Scope;
use crate::store::Op;

const SHUTDOWN_DISABLED: &[u8] = b"ERROR: shutdown not enabled\r\n";
const SHUTDOWN_MODE: &[u8] = b"CLIENT_ERROR invalid shutdown mode\r\n";
const REASSIGN_DISABLED: &[u8] = b"CLIENT_ERROR slab reassignment disabled\r\n";
const WATCH_TOO_MANY: &[u8] = b"WATCHER_TOO_MANY log watcher limit reached\r\n";

fn sizes_status(on: bool) -> &'static str {
    if on {
        "enabled"
    } else {
        "disabled"
    }
}

/// Asks the process to shut down through its signal handling (main waits
/// for SIGINT and SIGTERM), as memcached raises a signal in itself.
fn raise_shutdown(graceful: bool) {
    let sig = if graceful { libc::SIGTERM } else { libc::SIGINT };
    tracing::info!("shutdown requested by a client");
    // SAFETY: kill(2) on our own pid only sends a signal; it touches no memory.
    let rc = unsafe { libc::kill(std::process::id() as libc::pid_t, sig) };
    if rc != 0 {
        tracing::error!("cannot signal shutdown: {}", std::io::Error::last_os_error());
    }
}

/// Takes `stats detail dump` in command order: sent to every shard, it
/// answers once every earlier request of the connection has been counted,
/// and counts of later requests wait for it (see [`super::detail::Hold`]).
fn dump_in_order(env: &Env<'_>, conn: &Rc<ConnShared>) -> impl FnOnce() -> Vec<u8> + 'static {
    conn.detail.borrow_mut().issue_dump();
    let shared = env.shared.clone();
    let conn = conn.clone();
    move || conn.detail.borrow_mut().take_dump(&shared.admin.detail)
}

/// Handles an administrative text command.
pub fn text(env: &Env<'_>, conn: &Rc<ConnShared>, cmd: Admin<'_>, noreply: bool) -> Flow {
    let admin = &env.shared.admin;
    let say = |text: &'static [u8]| {
        if !noreply {
            conn.push(Reply::Static(text));
        }
    };
    match cmd {
        Admin::Detail(Detail::On) => {
            admin.detail.set_enabled(true);
            say(replies::OK);
        }
        Admin::Detail(Detail::Off) => {
            admin.detail.set_enabled(false);
            say(replies::OK);
        }
        Admin::Detail(Detail::Dump) => {
            let dump = dump_in_order(env, conn);
            env.shards
                .broadcast(conn, Scope::All, Some(Op::Stats { reset: false }), None, move |_| Reply::Bytes(dump()));
        }
        Admin::Watch { mask } => {
            // The connection starts the watcher's writer once the replies
            // before it are out (memcached sends them first, too).
            match admin.watchers.add(mask) {
                Ok(w) => conn.watch.set(Some(w)),
                Err(AddError::TooMany) => say(WATCH_TOO_MANY),
            }
        }
        Admin::Automove { level } => {
            admin.slab_automove.store(level, Ordering::Relaxed);
            say(replies::OK);
        }
        Admin::AutomoveRatio { ratio } => {
            if let Some(r) = safe_strtod(ratio) {
                admin.set_automove_ratio(r);
            }
            say(replies::OK);
        }
        Admin::Reassign { classes } => say(match classes {
            _ if !admin.slab_reassign => REASSIGN_DISABLED,
            None => replies::BAD_FORMAT,
            Some((src, dst)) => slabs::reassign_reply(src, dst),
        }),
        Admin::Shutdown { graceful } => match graceful {
            _ if !admin.shutdown_enabled => say(SHUTDOWN_DISABLED),
            None => say(SHUTDOWN_MODE),
            Some(graceful) => {
                raise_shutdown(graceful);
                conn.push(Reply::Close);
                return Flow::Stop;
            }
        },
        Admin::TrackSizes { on } => {
            admin.track_sizes.store(on, Ordering::Relaxed);
            // memcached ends this reply without END.
            conn.push(Reply::Bytes(format!("STAT sizes_status {}\r\n", sizes_status(on)).into_bytes()));
        }
    }
    Flow::Continue
}

/// Answers the binary `STAT` groups of the administrative features.
/// Returns false for the other groups.
pub fn binary_stat(env: &Env<'_>, conn: &Rc<ConnShared>, ctx: BinCtx, group: StatGroup) -> bool {
    let admin = &env.shared.admin;
    let end = |out: &mut Vec<u8>| bin_reply::stat(out, ctx, b"", b"");
    let mut out = Vec::new();
    match group {
        StatGroup::DetailOn | StatGroup::DetailOff => {
            admin.detail.set_enabled(group == StatGroup::DetailOn);
            end(&mut out);
        }
        StatGroup::DetailDump => {
            let dump = dump_in_order(env, conn);
            env.shards.broadcast(conn, Scope::All, Some(Op::Stats { reset: false }), None, move |_| {
                let mut out = Vec::new();
                bin_reply::stat(&mut out, ctx, b"detailed", &dump());
                bin_reply::stat(&mut out, ctx, b"", b"");
                Reply::Bytes(out)
            });
            return true;
        }
        StatGroup::SizesEnable | StatGroup::SizesDisable => {
            let on = group == StatGroup::SizesEnable;
            admin.track_sizes.store(on, Ordering::Relaxed);
            // memcached sends no end packet here.
            bin_reply::stat(&mut out, ctx, b"sizes_status", sizes_status(on).as_bytes());
        }
        _ => return false,
    }
    conn.push(Reply::Bytes(out));
    true
}
