//! Showing a [`Profile`]: a text table (`Display`), `tracing` events, and
//! the line format served to `gossamer top`.
//!
//! # Line format (version 1)
//!
//! One record per line, fields separated by single spaces, numbers in
//! decimal (durations in nanoseconds), the type name last because it may
//! hold spaces:
//!
//! ```text
//! gossamer-profile 1 <pid> <workers>
//! trust <id-hex> <trustee> <requests> <local_hits> <served> <service_ns> <rtt_count> <rtt_p50> <rtt_p99> <type name>
//! trustee <index> <batches_sent> <requests_sent> <queued_p50> <queued_p99> <batches_served> <requests_served> <busy_ns>
//! missing <worker>
//! end
//! ```

use std::fmt::{self, Display, Write as _};

use super::{Profile, TrustProfile};

/// Version of the line format written by [`Profile::to_lines`].
pub const FORMAT_VERSION: u32 = 1;

/// A duration in nanoseconds, short and human.
pub(crate) fn human_ns(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns}ns"),
        10_000..=9_999_999 => format!("{:.1}µs", ns as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.1}s", ns as f64 / 1e9),
    }
}

fn mean(total: u64, n: u64) -> u64 {
    total.checked_div(n).unwrap_or(0)
}

fn short_type(t: &str) -> String {
    // Drop module paths: `alloc::vec::Vec<u64>` -> `Vec<u64>`.
    let mut out = String::new();
    let mut rest = t;
    while let Some(i) = rest.find("::") {
        out.push_str(&rest[..i]);
        let cut = out.rfind(['<', ' ', '(', ',', '[', '&']).map_or(0, |p| p + 1);
        out.truncate(cut);
        rest = &rest[i + 2..];
    }
    out.push_str(rest);
    out
}

impl TrustProfile {
    /// Mean service time on the trustee, in nanoseconds.
    pub fn mean_service_ns(&self) -> u64 {
        mean(self.service_ns, self.served)
    }
}

impl Display for Profile {
    /// The table `gossamer top` shows: trusts by requests, then trustees.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<16} {:<28} {:>7} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:<8}",
            "TRUST", "TYPE", "TRUSTEE", "REQUESTS", "LOCAL", "SERVED", "SVC-MEAN", "RTT-P50", "RTT-P99", "MODE"
        )?;
        for t in &self.trusts {
            let mut ty = short_type(t.type_name);
            if ty.chars().count() > 28 {
                ty = ty.chars().take(27).collect::<String>() + "…";
            }
            writeln!(
                f,
                "{:<16} {:<28} {:>7} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:<8}",
                t.id.to_string(),
                ty,
                t.trustee,
                t.requests,
                t.local_hits,
                t.served,
                human_ns(t.mean_service_ns()),
                human_ns(t.round_trip.quantile(0.5)),
                human_ns(t.round_trip.quantile(0.99)),
                t.mode.unwrap_or("-"),
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<7} {:>12} {:>12} {:>10} {:>10} {:>10} {:>14} {:>10}",
            "TRUSTEE", "BATCHES-IN", "REQUESTS-IN", "MEAN-BATCH", "QUEUED-P50", "QUEUED-P99", "BATCHES-SERVED", "BUSY"
        )?;
        for t in &self.trustees {
            writeln!(
                f,
                "{:<7} {:>12} {:>12} {:>10.1} {:>10} {:>10} {:>14} {:>10}",
                t.trustee,
                t.batches_sent,
                t.requests_sent,
                t.mean_batch(),
                human_ns(t.queued.quantile(0.5)),
                human_ns(t.queued.quantile(0.99)),
                t.batches_served,
                human_ns(t.busy_ns),
            )?;
        }
        if !self.missing_workers.is_empty() {
            writeln!(f, "(no answer from workers {:?})", self.missing_workers)?;
        }
        Ok(())
    }
}

impl Profile {
    /// Emits one `tracing` event (info level, target `gossamer::profile`)
    /// per trust and per trustee.
    pub fn emit(&self) {
        for t in &self.trusts {
            tracing::info!(
                target: "gossamer::profile",
                trust = %t.id,
                type_name = t.type_name,
                trustee = t.trustee,
                requests = t.requests,
                local_hits = t.local_hits,
                served = t.served,
                service_ns = t.service_ns,
                rtt_p50_ns = t.round_trip.quantile(0.5),
                rtt_p99_ns = t.round_trip.quantile(0.99),
                mode = t.mode.unwrap_or("-"),
                "trust profile"
            );
        }
        for t in &self.trustees {
            tracing::info!(
                target: "gossamer::profile",
                trustee = t.trustee,
                batches_sent = t.batches_sent,
                requests_sent = t.requests_sent,
                mean_batch = t.mean_batch(),
                queued_p50_ns = t.queued.quantile(0.5),
                queued_p99_ns = t.queued.quantile(0.99),
                batches_served = t.batches_served,
                requests_served = t.requests_served,
                busy_ns = t.busy_ns,
                "trustee profile"
            );
        }
    }

    /// The profile in the line format of this module's docs, as served to
    /// `gossamer top`.
    pub fn to_lines(&self, workers: usize) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "gossamer-profile {FORMAT_VERSION} {} {workers}", std::process::id());
        for t in &self.trusts {
            let _ = writeln!(
                s,
                "trust {:x} {} {} {} {} {} {} {} {} {}",
                t.id.0,
                t.trustee,
                t.requests,
                t.local_hits,
                t.served,
                t.service_ns,
                t.round_trip.count(),
                t.round_trip.quantile(0.5),
                t.round_trip.quantile(0.99),
                t.type_name.replace('\n', " ")
            );
        }
        for t in &self.trustees {
            let _ = writeln!(
                s,
                "trustee {} {} {} {} {} {} {} {}",
                t.trustee,
                t.batches_sent,
                t.requests_sent,
                t.queued.quantile(0.5),
                t.queued.quantile(0.99),
                t.batches_served,
                t.requests_served,
                t.busy_ns
            );
        }
        for w in &self.missing_workers {
            let _ = writeln!(s, "missing {w}");
        }
        s.push_str("end\n");
        s
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn type_names_lose_their_paths() {
        assert_eq!(super::short_type("u64"), "u64");
        assert_eq!(super::short_type("alloc::vec::Vec<u64>"), "Vec<u64>");
        assert_eq!(
            super::short_type("std::collections::hash::map::HashMap<alloc::string::String, u64>"),
            "HashMap<String, u64>"
        );
    }
}
