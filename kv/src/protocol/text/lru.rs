//! Parser for the memory and crawler commands `cache_memlimit` and
//! `lru_crawler`, with memcached 1.6.18's token checks and replies.

use super::command::{Command, CrawlScope, CrawlerSetting, LruCommand};
use super::meta::tokens;
use super::parse::replies;
use crate::numeric::{c_str, safe_strtoul};

/// memcached's largest slab class id plus one (`MAX_NUMBER_OF_SLAB_CLASSES`).
const CLASS_LIMIT: u32 = 64;

/// Replies of these commands that need no server state.
pub mod admin_replies {
    /// `cache_memlimit` below 8 megabytes.
    pub const MEMLIMIT_TOO_SMALL: &[u8] = b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n";
    /// `cache_memlimit` given in bytes.
    pub const MEMLIMIT_NOT_BYTES: &[u8] = b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n";
    /// `lru_crawler sleep` over a second.
    pub const SLEEP_TOO_LONG: &[u8] = b"CLIENT_ERROR sleep must be one second or less\r\n";
}

fn reply(text: &'static [u8], noreply: bool) -> Command<'static> {
    Command::Reply { text, noreply }
}

/// `cache_memlimit <megabytes> [noreply]`.
pub fn memlimit(line: &[u8]) -> Command<'static> {
    let (t, n) = tokens(c_str(line));
    if n != 3 && n != 4 {
        return reply(replies::ERROR, false);
    }
    let noreply = c_str(t[n - 2]) == b"noreply";
    match safe_strtoul(t[1]) {
        None => reply(replies::ERROR, noreply),
        Some(m) if m < 8 => reply(admin_replies::MEMLIMIT_TOO_SMALL, noreply),
        Some(m) if m > 1_000_000_000 => reply(admin_replies::MEMLIMIT_NOT_BYTES, noreply),
        Some(megabytes) => Command::Lru(LruCommand::MemLimit { megabytes, noreply }),
    }
}

/// The class list of `crawl` and `metadump`, as `lru_crawler_crawl`
/// reads it.
fn scope(arg: &[u8]) -> CrawlScope {
    match c_str(arg) {
        b"all" => CrawlScope::All,
        b"hash" => CrawlScope::Hash,
        list => {
            let mut ids = Vec::new();
            for p in list.split(|&b| b == b',').filter(|p| !p.is_empty()) {
                match safe_strtoul(p) {
                    Some(id) if (1..CLASS_LIMIT).contains(&id) => ids.push(id),
                    _ => return CrawlScope::Bad,
                }
            }
            CrawlScope::Classes(ids)
        }
    }
}

/// `lru_crawler <subcommand> ...`.
pub fn lru_crawler(line: &[u8]) -> Command<'static> {
    let (t, n) = tokens(c_str(line));
    let sub = if t.len() > 1 { c_str(t[1]) } else { &[][..] };
    match (n, sub) {
        (4, b"crawl") => Command::Lru(LruCommand::Crawl(scope(t[2]))),
        (4, b"metadump") => Command::Lru(LruCommand::MetaDump(scope(t[2]))),
        (4, b"tocrawl") => match safe_strtoul(t[2]) {
            Some(n) => Command::Lru(LruCommand::CrawlerSetting(CrawlerSetting::ToCrawl(n))),
            None => reply(replies::BAD_FORMAT, false),
        },
        (4, b"sleep") => match safe_strtoul(t[2]) {
            Some(s) if s > 1_000_000 => reply(admin_replies::SLEEP_TOO_LONG, false),
            Some(s) => Command::Lru(LruCommand::CrawlerSetting(CrawlerSetting::Sleep(s))),
            None => reply(replies::BAD_FORMAT, false),
        },
        (3, b"enable") => Command::Lru(LruCommand::Crawler { enable: true }),
        (3, b"disable") => Command::Lru(LruCommand::Crawler { enable: false }),
        _ => reply(replies::ERROR, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn memlimit_forms() {
        assert_eq!(memlimit(b"cache_memlimit"), reply(replies::ERROR, false));
        assert_eq!(memlimit(b"cache_memlimit x"), reply(replies::ERROR, false));
        assert_eq!(memlimit(b"cache_memlimit noreply"), reply(replies::ERROR, true));
        assert_eq!(memlimit(b"cache_memlimit 7"), reply(admin_replies::MEMLIMIT_TOO_SMALL, false));
        assert_eq!(memlimit(b"cache_memlimit 1000000001"), reply(admin_replies::MEMLIMIT_NOT_BYTES, false));
        assert_eq!(
            memlimit(b"cache_memlimit 100 noreply"),
            Command::Lru(LruCommand::MemLimit { megabytes: 100, noreply: true })
        );
        assert_eq!(
            memlimit(b"cache_memlimit 64 x"),
            Command::Lru(LruCommand::MemLimit { megabytes: 64, noreply: false })
        );
        assert_eq!(memlimit(b"cache_memlimit 64 x y"), reply(replies::ERROR, false));
        // memcached reads the line only up to a NUL byte.
        assert_eq!(
            memlimit(b"cache_memlimit 64\0 x y"),
            Command::Lru(LruCommand::MemLimit { megabytes: 64, noreply: false })
        );
    }

    #[test]
    fn crawler_forms() {
        assert_eq!(lru_crawler(b"lru_crawler"), reply(replies::ERROR, false));
        assert_eq!(lru_crawler(b"lru_crawler metadump"), reply(replies::ERROR, false));
        assert_eq!(lru_crawler(b"lru_crawler metadump all"), Command::Lru(LruCommand::MetaDump(CrawlScope::All)));
        assert_eq!(lru_crawler(b"lru_crawler metadump hash"), Command::Lru(LruCommand::MetaDump(CrawlScope::Hash)));
        assert_eq!(
            lru_crawler(b"lru_crawler metadump 1,,2"),
            Command::Lru(LruCommand::MetaDump(CrawlScope::Classes(vec![1, 2])))
        );
        for bad in [&b"0"[..], b"64", b"x", b"1,x"] {
            let line = [&b"lru_crawler crawl "[..], bad].concat();
            assert_eq!(lru_crawler(&line), Command::Lru(LruCommand::Crawl(CrawlScope::Bad)));
        }
        assert_eq!(lru_crawler(b"lru_crawler tocrawl x"), reply(replies::BAD_FORMAT, false));
        assert_eq!(lru_crawler(b"lru_crawler sleep 2000000"), reply(admin_replies::SLEEP_TOO_LONG, false));
        assert_eq!(
            lru_crawler(b"lru_crawler sleep 10"),
            Command::Lru(LruCommand::CrawlerSetting(CrawlerSetting::Sleep(10)))
        );
        assert_eq!(
            lru_crawler(b"lru_crawler tocrawl 5"),
            Command::Lru(LruCommand::CrawlerSetting(CrawlerSetting::ToCrawl(5)))
        );
        assert_eq!(lru_crawler(b"lru_crawler enable"), Command::Lru(LruCommand::Crawler { enable: true }));
        assert_eq!(lru_crawler(b"lru_crawler foo bar"), reply(replies::ERROR, false));
    }

    proptest! {
        #[test]
        fn valid_commands_round_trip(
            megabytes in 8u32..=1_000_000_000,
            noreply in any::<bool>(),
            ids in proptest::collection::vec(1u32..64, 1..8),
            dump in any::<bool>(),
        ) {
            let line = format!("cache_memlimit {megabytes}{}", if noreply { " noreply" } else { "" });
            prop_assert_eq!(memlimit(line.as_bytes()), Command::Lru(LruCommand::MemLimit { megabytes, noreply }));
            let list: Vec<String> = ids.iter().map(u32::to_string).collect();
            let line = format!("lru_crawler {} {}", if dump { "metadump" } else { "crawl" }, list.join(","));
            let scope = CrawlScope::Classes(ids);
            let want = if dump { LruCommand::MetaDump(scope) } else { LruCommand::Crawl(scope) };
            prop_assert_eq!(lru_crawler(line.as_bytes()), Command::Lru(want));
        }

        #[test]
        fn arbitrary_lines_never_panic(rest in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = memlimit(&[&b"cache_memlimit "[..], &rest].concat());
            let _ = lru_crawler(&[&b"lru_crawler "[..], &rest].concat());
        }
    }
}
