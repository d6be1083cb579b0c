//! memcached's `-o` extended options: a comma-separated list of `name` or
//! `name=value`. The ones that mean something here are honoured; the rest
//! of memcached 1.6.18's names are accepted and ignored (see the README),
//! and any other name is refused, as memcached refuses it.

use crate::numeric::{safe_strtol, safe_strtoul};
use crate::protocol::text::admin::safe_strtod;
use crate::store::shard::LruSettings;

/// What a bad `-o` option is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// Not one of memcached's names.
    #[error("Illegal suboption \"{0}\"")]
    Illegal(String),
    /// A name that needs a value had none.
    #[error("Missing {0} argument")]
    Missing(String),
    /// The value does not parse.
    #[error("could not parse argument to {0}")]
    Unparsable(String),
    /// The value is out of range.
    #[error("{0} must be {1}")]
    Range(String, &'static str),
    /// HOT and WARM would take more than 80% of the memory.
    #[error("hot_lru_pct + warm_lru_pct cannot be more than 80% combined")]
    LruShares,
}

/// memcached 1.6.18's `-o` names that are accepted without effect here
/// (memory layout, LRU and hash tuning, TLS, privileges, extstore).
const ACCEPTED: &[&str] = &[
    "maxconns_fast",
    "no_maxconns_fast",
    "hashpower",
    "no_hashexpand",
    "slab_automove_window",
    "tail_repair_time",
    "hash_algorithm",
    "idle_timeout",
    "slab_sizes",
    "slab_chunk_max",
    "no_inline_ascii_resp",
    "inline_ascii_resp",
    "modern",
    "no_chunked_items",
    "no_drop_privileges",
    "drop_privileges",
    "resp_obj_mem_limit",
    "read_buf_mem_limit",
    "ssl_chain_cert",
    "ssl_key",
    "ssl_verify_mode",
    "ssl_keyformat",
    "ssl_ciphers",
    "ssl_ca_cert",
    "ssl_wbuf_size",
    "ssl_session_cache",
    "ssl_kernel_tls",
    "ssl_min_version",
];

/// The extended options, with memcached's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Extended {
    /// Bytes a log watcher may buffer (`watcher_logbuf_size`, in KiB).
    pub watcher_logbuf_size: u64,
    /// memcached's per-worker log buffer (`worker_logbuf_size`, in KiB);
    /// reported only.
    pub worker_logbuf_size: u64,
    /// `stats sizes` lists item sizes (`track_sizes`).
    pub track_sizes: bool,
    /// `slab_automove` level (reported; `slabs automove` changes it).
    pub slab_automove: u32,
    /// `slab_automove_ratio` (reported).
    pub slab_automove_ratio: f64,
    /// `slabs reassign` allowed (`no_slab_reassign` turns it off).
    pub slab_reassign: bool,
    /// The LRU crawler is enabled (`lru_crawler`, `no_lru_crawler`).
    pub lru_crawler: bool,
    /// Expired items are reclaimed in the background (`lru_maintainer`,
    /// `no_lru_maintainer`).
    pub lru_maintainer: bool,
    /// Microseconds the LRU crawler rests between steps
    /// (`lru_crawler_sleep`).
    pub lru_crawler_sleep: u32,
    /// Items per class a crawl checks at most (`lru_crawler_tocrawl`; 0:
    /// all).
    pub lru_crawler_tocrawl: u32,
    /// The segmented LRU (off with `no_lru_maintainer` or `no_modern`;
    /// `hot_lru_pct`, `warm_lru_pct`, `hot_max_factor`, `warm_max_factor`,
    /// `temporary_ttl`).
    pub lru: LruSettings,
}

impl Default for Extended {
    fn default() -> Extended {
        Extended {
            watcher_logbuf_size: 256 * 1024,
            worker_logbuf_size: 64 * 1024,
            track_sizes: false,
            slab_automove: 1,
            slab_automove_ratio: 0.8,
            slab_reassign: true,
            lru_crawler: true,
            lru_maintainer: true,
            lru_crawler_sleep: 100,
            lru_crawler_tocrawl: 0,
            lru: LruSettings::default(),
        }
    }
}

fn value<'a>(name: &str, v: Option<&'a str>) -> Result<&'a str, OptionError> {
    v.ok_or_else(|| OptionError::Missing(name.to_string()))
}

fn kib(name: &str, v: Option<&str>) -> Result<u64, OptionError> {
    let n = safe_strtoul(value(name, v)?.as_bytes()).ok_or_else(|| OptionError::Unparsable(name.to_string()))?;
    Ok(u64::from(n) * 1024)
}

/// A share of memory in percent, as memcached takes it: 1 to 79.
fn percent(name: &str, v: Option<&str>) -> Result<u32, OptionError> {
    match safe_strtoul(value(name, v)?.as_bytes()) {
        Some(p @ 1..=79) => Ok(p),
        Some(_) => Err(OptionError::Range(name.to_string(), "> 1 and < 80")),
        None => Err(OptionError::Unparsable(name.to_string())),
    }
}

/// An age factor, as memcached takes it: more than 0.
fn factor(name: &str, v: Option<&str>) -> Result<f64, OptionError> {
    match safe_strtod(value(name, v)?.as_bytes()) {
        Some(f) if f > 0.0 => Ok(f),
        Some(_) => Err(OptionError::Range(name.to_string(), "> 0")),
        None => Err(OptionError::Unparsable(name.to_string())),
    }
}

impl Extended {
    /// Applies the `-o` lists in `lists` in order.
    pub fn parse<S: AsRef<str>>(lists: &[S]) -> Result<Extended, OptionError> {
        let mut x = Extended::default();
        for list in lists {
            for opt in list.as_ref().split(',').filter(|o| !o.is_empty()) {
                x.apply(opt)?;
            }
        }
        // memcached's checks once every option is read.
        if x.lru.hot_lru_pct + x.lru.warm_lru_pct > 80 {
            return Err(OptionError::LruShares);
        }
        // The segments are the maintainer's to move: without it, one LRU.
        if !x.lru_maintainer {
            x.lru.segmented = false;
        }
        Ok(x)
    }

    fn apply(&mut self, opt: &str) -> Result<(), OptionError> {
        let (name, v) = match opt.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (opt, None),
        };
        match name {
            "watcher_logbuf_size" => self.watcher_logbuf_size = kib(name, v)?,
            "worker_logbuf_size" => self.worker_logbuf_size = kib(name, v)?,
            "track_sizes" => self.track_sizes = true,
            "slab_reassign" => self.slab_reassign = true,
            "no_slab_reassign" => self.slab_reassign = false,
            "no_slab_automove" => self.slab_automove = 0,
            "lru_crawler" => self.lru_crawler = true,
            "no_lru_crawler" => self.lru_crawler = false,
            "lru_maintainer" => self.lru_maintainer = true,
            "no_lru_maintainer" => self.lru_maintainer = false,
            "lru_crawler_sleep" => match safe_strtoul(value(name, v)?.as_bytes()) {
                Some(us @ 0..=1_000_000) => self.lru_crawler_sleep = us,
                Some(_) => return Err(OptionError::Range(name.to_string(), "between 0 and 1000000")),
                None => return Err(OptionError::Unparsable(name.to_string())),
            },
            "lru_crawler_tocrawl" => {
                self.lru_crawler_tocrawl = safe_strtoul(value(name, v)?.as_bytes())
                    .ok_or_else(|| OptionError::Unparsable(name.to_string()))?;
            }
            // memcached 1.6's switch back to 1.4's behaviour: one LRU, no
            // maintainer or crawler, no slab moves.
            "no_modern" => {
                self.lru.segmented = false;
                self.lru_maintainer = false;
                self.lru_crawler = false;
                self.slab_reassign = false;
                self.slab_automove = 0;
            }
            "hot_lru_pct" => self.lru.hot_lru_pct = percent(name, v)?,
            "warm_lru_pct" => self.lru.warm_lru_pct = percent(name, v)?,
            "hot_max_factor" => self.lru.hot_max_factor = factor(name, v)?,
            "warm_max_factor" => self.lru.warm_max_factor = factor(name, v)?,
            "temporary_ttl" => {
                self.lru.temp_lru = true;
                self.lru.temporary_ttl = safe_strtoul(value(name, v)?.as_bytes())
                    .ok_or_else(|| OptionError::Unparsable(name.to_string()))?;
            }
            "slab_automove" => {
                let Some(v) = v else {
                    self.slab_automove = 1;
                    return Ok(());
                };
                match safe_strtol(v.as_bytes()) {
                    Some(l @ 0..=2) => self.slab_automove = l as u32,
                    Some(_) => return Err(OptionError::Range(name.to_string(), "0, 1 or 2")),
                    None => return Err(OptionError::Unparsable(name.to_string())),
                }
            }
            "slab_automove_ratio" => {
                let v = value(name, v)?;
                self.slab_automove_ratio =
                    safe_strtod(v.as_bytes()).ok_or_else(|| OptionError::Unparsable(name.to_string()))?;
            }
            _ if ACCEPTED.contains(&name) => {}
            _ => return Err(OptionError::Illegal(opt.to_string())),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn memcached_names() {
        let x =
            Extended::parse(&["track_sizes,watcher_logbuf_size=1,slab_automove=2", "no_lru_crawler,modern"]).unwrap();
        assert!(x.track_sizes);
        assert_eq!((x.watcher_logbuf_size, x.slab_automove), (1024, 2));
        assert_eq!(Extended::parse(&[""]).unwrap(), Extended::default());
        assert_eq!(Extended::parse(&["bogus"]), Err(OptionError::Illegal("bogus".into())));
        assert_eq!(
            Extended::parse(&["watcher_logbuf_size"]).unwrap_err().to_string(),
            "Missing watcher_logbuf_size argument"
        );
        assert_eq!(
            Extended::parse(&["watcher_logbuf_size=x"]).unwrap_err().to_string(),
            "could not parse argument to watcher_logbuf_size"
        );
        assert_eq!(Extended::parse(&["bogus"]).unwrap_err().to_string(), "Illegal suboption \"bogus\"");
        assert!(!Extended::parse(&["no_slab_reassign"]).unwrap().slab_reassign);
        assert_eq!(Extended::parse(&["slab_automove_ratio=0.5"]).unwrap().slab_automove_ratio, 0.5);
        let x = Extended::parse(&["no_lru_maintainer,no_lru_crawler"]).unwrap();
        assert!(!x.lru_maintainer && !x.lru_crawler);
        assert!(x.lru_maintainer != Extended::parse(&["lru_maintainer"]).unwrap().lru_maintainer);
        assert!(!x.lru.segmented, "no maintainer: one LRU");
    }

    #[test]
    fn segmented_lru_settings() {
        let x = Extended::parse(&["hot_lru_pct=10,warm_lru_pct=50,hot_max_factor=0.5,temporary_ttl=30"]).unwrap();
        let lru = x.lru;
        assert!(lru.segmented && lru.temp_lru);
        assert_eq!((lru.hot_lru_pct, lru.warm_lru_pct, lru.temporary_ttl), (10, 50, 30));
        assert_eq!((lru.hot_max_factor, lru.warm_max_factor), (0.5, 2.0));
        assert!(!Extended::default().lru.temp_lru);
        let old = Extended::parse(&["no_modern"]).unwrap();
        assert!(!old.lru.segmented && !old.lru_maintainer && !old.lru_crawler);
        // memcached 1.6.18 has no such names, and says so.
        assert!(Extended::parse(&["no_lru_segmented"]).is_err());
        let err = |o: &str| Extended::parse(&[o]).unwrap_err().to_string();
        assert_eq!(
            err("hot_lru_pct=50,warm_lru_pct=40"),
            "hot_lru_pct + warm_lru_pct cannot be more than 80% combined"
        );
        assert_eq!(err("hot_lru_pct=0"), "hot_lru_pct must be > 1 and < 80");
        assert_eq!(err("warm_lru_pct=80"), "warm_lru_pct must be > 1 and < 80");
        assert_eq!(err("warm_max_factor=0"), "warm_max_factor must be > 0");
        assert!(Extended::parse(&["temporary_ttl=x"]).is_err());
    }

    proptest! {
        /// Any list parses or fails without panicking, and a list of
        /// accepted names always parses.
        #[test]
        fn arbitrary_lists(list in "[a-z_=0-9,.]{0,60}") {
            let _ = Extended::parse(&[list]);
        }

        #[test]
        fn accepted_names(picks in proptest::collection::vec(0..ACCEPTED.len(), 0..8)) {
            let list: Vec<&str> = picks.iter().map(|&i| ACCEPTED[i]).collect();
            prop_assert!(Extended::parse(&[list.join(",")]).is_ok());
        }
    }
}
