//! `gossamer hosts`: what each daemon's host offers.

use std::time::Duration;

use crate::client;
use crate::proto::{ClientMsg, DaemonMsg, HostInfo};
use crate::run::HostSlots;
use crate::CliError;

/// Asks every daemon for its host's resources; a table, and whether every host answered.
pub fn table(hosts: &[HostSlots], port: u16, secret: &[u8]) -> (String, bool) {
    let answers: Vec<Result<(String, HostInfo), CliError>> = std::thread::scope(|s| {
        let hs: Vec<_> = hosts
            .iter()
            .map(|h| {
                s.spawn(move || {
                    let mut c = client::connect(&h.host, port, secret)?;
                    match client::request(&mut c, &ClientMsg::Query, Duration::from_secs(15))? {
                        DaemonMsg::Info(i) => Ok((c.addr.to_string(), i)),
                        other => {
                            Err(CliError::Host { host: h.host.clone(), msg: format!("unexpected answer {other:?}") })
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("query thread")).collect()
    });
    let mut out = format!(
        "{:<16} {:<22} {:<10} {:>5} {:>9} {:<8} {:<24} {}\n",
        "HOST", "DAEMON", "NAME", "CORES", "MEMORY", "VERSION", "UCX TRANSPORTS", "UCX DEVICES"
    );
    let mut all = true;
    for (h, a) in hosts.iter().zip(answers) {
        match a {
            Ok((addr, i)) => {
                let ts = match &i.transports {
                    Ok(t) if t.is_empty() => "none".to_string(),
                    Ok(t) => t.join(","),
                    Err(e) => e.clone(),
                };
                let ds = if i.devices.is_empty() { "-".to_string() } else { i.devices.join(",") };
                out += &format!(
                    "{:<16} {:<22} {:<10} {:>5} {:>7.1}Gi {:<8} {:<24} {}\n",
                    h.host,
                    addr,
                    i.host,
                    i.cores,
                    i.memory_bytes as f64 / (1u64 << 30) as f64,
                    i.version,
                    ts,
                    ds
                );
            }
            Err(e) => {
                all = false;
                out += &format!("{:<16} error: {e}\n", h.host);
            }
        }
    }
    (out, all)
}
