//! A shard's part of `lru_crawler crawl`: a walk over every item of the
//! classes asked for that removes the expired and flushed ones, counted as
//! memcached's crawler counts them (`crawler_reclaimed`,
//! `crawler_items_checked`, `expired_unfetched`).
//!
//! The walk runs in the background, a bounded step at a time: the shard's
//! maintainer (a fiber on the shard's thread) delegates [`Shard::crawl_step`]
//! until it reports the walk done, yielding to the trustee's other
//! requests between steps, so that a crawl of a large shard never stalls
//! clients. It goes through the table's slots in order; an item stored or
//! removed meanwhile may be seen or missed, as memcached's crawler may miss
//! items linked behind it.

use super::table::Slot;
use super::Shard;

/// A crawl in progress.
#[derive(Debug, Clone)]
pub struct CrawlJob {
    /// Slab class ids to crawl (`None`: all).
    classes: Option<Vec<u32>>,
    /// The next slot to look at.
    next: Slot,
    /// Items to check per class at most (memcached's `lru_crawler
    /// tocrawl`; 0: all).
    tocrawl: u32,
    /// Items checked so far per class (index: class - 1).
    checked: Vec<u32>,
}

impl Shard {
    /// Starts a crawl of `classes` (all: `None`), checking at most
    /// `tocrawl` items per class (0: all), in place of any crawl still
    /// running. Runs its first `budget` items at once.
    pub(super) fn start_crawl(&mut self, classes: Option<Vec<u32>>, tocrawl: u32, now: u32, budget: usize) {
        self.crawler = Some(CrawlJob { classes, next: 0, tocrawl, checked: Vec::new() });
        self.crawl_step(now, budget);
    }

    /// Whether a crawl is running.
    pub fn crawling(&self) -> bool {
        self.crawler.is_some()
    }

    /// Looks at up to `budget` slots of the running crawl at relative time
    /// `now`. Returns whether some are left.
    pub fn crawl_step(&mut self, now: u32, budget: usize) -> bool {
        let Some(mut job) = self.crawler.take() else { return false };
        let end = self.map.slots();
        let stop = (job.next as usize).saturating_add(budget).min(end);
        for slot in job.next as usize..stop {
            let slot = slot as Slot;
            let Some(it) = self.map.at(slot) else { continue };
            let class = it.class;
            if job.classes.as_ref().is_some_and(|c| !c.contains(&u32::from(class))) {
                continue;
            }
            let i = usize::from(class).saturating_sub(1);
            if i >= job.checked.len() {
                job.checked.resize(i + 1, 0);
            }
            if job.tocrawl != 0 && job.checked[i] >= job.tocrawl {
                continue;
            }
            job.checked[i] += 1;
            let dead = it.expired(now) || self.is_flushed(it, now);
            let fetched = it.fetched;
            self.stats.crawler_items_checked += 1;
            self.class_mut(class).crawler_items_checked += 1;
            if dead {
                let (k, it) = self.map.remove_slot(slot);
                let size = it.size(k.len()) as u64;
                self.mem_used -= size;
                self.account_out(class, size);
                let c = self.class_mut(class);
                c.crawler_reclaimed += 1;
                c.expired_unfetched += u64::from(!fetched);
                self.stats.crawler_reclaimed += 1;
                self.stats.expired_unfetched += u64::from(!fetched);
            }
        }
        job.next = stop as Slot;
        // Removing the last item gives the slots back: then it is done too.
        if (job.next as usize) < self.map.slots() {
            self.crawler = Some(job);
            true
        } else {
            false
        }
    }
}
