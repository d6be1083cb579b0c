//! Arbitrary bytes never crash a decoder: every message either side decodes
//! gives an error or a message, never a panic, and no frame allocates more
//! than the limit.

use gossamer_cli::proto::{self, ClientMsg, DaemonMsg, ProtoError, MAX_FRAME};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn client_messages_from_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = proto::decode::<ClientMsg>(&bytes);
        let _ = proto::decode_frame::<ClientMsg>(&bytes);
        let _ = proto::read_msg::<ClientMsg>(&mut &bytes[..]);
    }

    #[test]
    fn daemon_messages_from_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = proto::decode::<DaemonMsg>(&bytes);
        let _ = proto::decode_frame::<DaemonMsg>(&bytes);
    }

    #[test]
    fn framed_arbitrary_bodies(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        let _ = proto::decode_frame::<ClientMsg>(&frame);
        let _ = proto::decode_frame::<DaemonMsg>(&frame);
    }

    #[test]
    fn oversized_lengths_are_errors(len in (MAX_FRAME as u32 + 1)..=u32::MAX, tail in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut frame = len.to_be_bytes().to_vec();
        frame.extend_from_slice(&tail);
        prop_assert!(matches!(proto::read_msg::<ClientMsg>(&mut &frame[..]), Err(ProtoError::TooLarge(_))));
    }

    #[test]
    fn start_round_trips(binary in ".{0,64}", args in proptest::collection::vec(".{0,16}", 0..4), rank in any::<u32>()) {
        let m = ClientMsg::Start {
            binary,
            sha256: [9; 32],
            args,
            ranks: vec![proto::RankSpec { rank, env: vec![("GOSSAMER_RANK".into(), rank.to_string())] }],
        };
        prop_assert_eq!(proto::decode_frame::<ClientMsg>(&proto::encode(&m).unwrap()).unwrap(), m);
    }
}
