//! The daemon's side of the handshake, asynchronously: the initiator's
//! handshake record (at most [`HANDSHAKE_RECORD_MAX`] bytes), the reply, and
//! the first message, which must be [`ClientMsg::Hello`] in one record of
//! at most [`FIRST_RECORD_MAX`] bytes. The caller bounds the whole by
//! [`proto::HANDSHAKE`]. Nothing larger than these records is read or
//! stored for a peer that has not proved the secret.

use gossamer_session::{Opener, Psk, Responder, Sealer, HANDSHAKE_RECORD_MAX};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::wire::read_record;
use crate::proto::{self, ClientMsg};

/// The largest record carrying the first message: [`proto::FIRST_MAX`]
/// bytes, the piece flag and the 16-byte tag.
pub const FIRST_RECORD_MAX: usize = proto::FIRST_MAX + 17;

/// Runs the handshake; the session's halves and the protocol the client
/// said hello with.
pub async fn accept(s: &mut TcpStream, psk: &Psk) -> Result<(Sealer, Opener, u32), String> {
    let mut buf = Vec::with_capacity(HANDSHAKE_RECORD_MAX);
    read_record(s, &mut buf, HANDSHAKE_RECORD_MAX).await?;
    let (session, reply) = Responder::respond(psk, proto::PROLOGUE, &buf).map_err(|e| e.to_string())?;
    s.write_all(&reply).await.map_err(|e| format!("connection: {e}"))?;
    let (sealer, mut opener) = session.split();
    read_record(s, &mut buf, FIRST_RECORD_MAX).await?;
    // A replayed or forged first handshake message cannot produce this one.
    let first = match opener.open(&buf, proto::FIRST_MAX) {
        Ok(Some(m)) => m,
        Ok(None) => return Err("the first message does not fit one record".into()),
        Err(_) => return Err("authentication failed: the peer does not know the shared secret".into()),
    };
    match proto::decode::<ClientMsg>(&first) {
        Ok(ClientMsg::Hello { protocol }) => Ok((sealer, opener, protocol)),
        Ok(_) => Err("the first message is not Hello".into()),
        Err(e) => Err(format!("the first message: {e}")),
    }
}
