//! Meta commands: each one delegated to the shard that owns its key,
//! which renders the reply (see `store::shard::meta`); `mn` answers at
//! once and marks the replies before it as written, as memcached writes
//! them out there.

use std::rc::Rc;

use super::Env;
use crate::protocol::text::{replies, MetaCommand, TextKind};
use crate::server::local::ConnShared;
use crate::server::outq::{Ctx, Reply};
use crate::server::shared::bump;
use crate::store::Op;

const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";

/// Handles one meta command.
pub fn meta(env: &Env<'_>, conn: &Rc<ConnShared>, cmd: MetaCommand) {
    let shards = env.shards;
    match cmd {
        MetaCommand::NoOp => {
            conn.push(Reply::Static(replies::MN));
            conn.out.borrow_mut().mark_flushed();
        }
        MetaCommand::Op(op) => {
            let shard = shards.of(&op.key);
            shards.issue(conn, shard, Op::Meta(op), Ctx::Text(TextKind::Meta));
        }
        MetaCommand::TooLarge { key } => {
            bump(&env.counters.store_too_large, 1);
            // memcached drops the old item rather than keep stale data.
            shards.issue(conn, shards.of(&key), Op::Unlink { key }, Ctx::Silent);
            conn.push(Reply::Static(TOO_LARGE));
        }
    }
}
