//! The group a binary `STAT` request names in its key, matched as
//! memcached 1.6.18's `process_bin_stat` matches it: `reset`, `settings`
//! and `detail` by prefix, the item groups exactly.

/// A `STAT` group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatGroup {
    /// Empty key: the general stats.
    General,
    /// `reset…`
    Reset,
    /// `settings…`
    Settings,
    /// `detail on…`
    DetailOn,
    /// `detail off…`
    DetailOff,
    /// `detail dump…`
    DetailDump,
    /// `items`
    Items,
    /// `slabs`
    Slabs,
    /// `sizes`
    Sizes,
    /// `sizes_enable`
    SizesEnable,
    /// `sizes_disable`
    SizesDisable,
}

/// The group of `key`, or `None` (memcached answers `Not found`).
pub fn stat_group(key: &[u8]) -> Option<StatGroup> {
    use StatGroup::*;
    if key.is_empty() {
        return Some(General);
    }
    if key.starts_with(b"reset") {
        return Some(Reset);
    }
    if key.starts_with(b"settings") {
        return Some(Settings);
    }
    if let Some(sub) = key.strip_prefix(b"detail") {
        return if sub.starts_with(b" dump") {
            Some(DetailDump)
        } else if sub.starts_with(b" on") {
            Some(DetailOn)
        } else if sub.starts_with(b" off") {
            Some(DetailOff)
        } else {
            None
        };
    }
    match key {
        b"items" => Some(Items),
        b"slabs" => Some(Slabs),
        b"sizes" => Some(Sizes),
        b"sizes_enable" => Some(SizesEnable),
        b"sizes_disable" => Some(SizesDisable),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn memcached_groups() {
        use StatGroup::*;
        for (k, g) in [
            (&b""[..], Some(General)),
            (b"reset", Some(Reset)),
            (b"resetx", Some(Reset)),
            (b"settings", Some(Settings)),
            (b"detail on", Some(DetailOn)),
            (b"detail off", Some(DetailOff)),
            (b"detail dump", Some(DetailDump)),
            (b"detail", None),
            (b"detail x", None),
            (b"detailx", None),
            (b"items", Some(Items)),
            (b"items x", None),
            (b"slabs", Some(Slabs)),
            (b"sizes", Some(Sizes)),
            (b"sizes_enable", Some(SizesEnable)),
            (b"sizes_disable", Some(SizesDisable)),
            (b"conns", None),
            (b"bogus", None),
        ] {
            assert_eq!(stat_group(k), g, "{}", String::from_utf8_lossy(k));
        }
    }

    proptest! {
        /// Any key maps to one group or none, and a known group's name
        /// followed by anything keeps the prefix-matched groups.
        #[test]
        fn arbitrary_keys(key in proptest::collection::vec(any::<u8>(), 0..40)) {
            let g = stat_group(&key);
            if key.starts_with(b"reset") {
                prop_assert_eq!(g, Some(StatGroup::Reset));
            }
            if g == Some(StatGroup::Items) {
                prop_assert_eq!(&key[..], b"items");
            }
        }
    }
}
