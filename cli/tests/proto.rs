//! Arbitrary bytes never crash a decoder: every message either side decodes
//! gives an error or a message, never a panic. (What arrives on the wire is
//! first opened by the session, whose own tests feed it arbitrary records.)

use gossamer_cli::proto::{self, ClientMsg, DaemonMsg, ProtoError, MAX_FRAME};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn client_messages_from_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = proto::decode::<ClientMsg>(&bytes);
    }

    #[test]
    fn daemon_messages_from_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = proto::decode::<DaemonMsg>(&bytes);
    }

    #[test]
    fn oversized_bodies_are_errors(extra in 1usize..64) {
        let body = vec![0u8; MAX_FRAME + extra];
        prop_assert!(matches!(proto::decode::<ClientMsg>(&body), Err(ProtoError::TooLarge(_))));
    }

    #[test]
    fn start_round_trips(binary in ".{0,64}", args in proptest::collection::vec(".{0,16}", 0..4), rank in any::<u32>()) {
        let m = ClientMsg::Start {
            binary,
            sha256: [9; 32],
            args,
            ranks: vec![proto::RankSpec { rank, env: vec![("GOSSAMER_RANK".into(), rank.to_string())] }],
        };
        prop_assert_eq!(proto::decode::<ClientMsg>(&proto::encode(&m).unwrap()).unwrap(), m);
    }
}
