//! `gossamer-bench compare BASE [--head REF]`: the effect of a change to the
//! core in one command. Builds this benchmark program at two commits (or at
//! one commit and the working tree), runs the micro-figures and a slice of
//! `faa` of both, interleaved round by round so that the machine's noise
//! hits them alike, and prints, per figure, both medians and the gain of
//! the head over the base (> 1: the head is better, whichever way the
//! figure's unit points).

mod build;
mod figures;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cli::{Common, CompareArgs};
use crate::error::{BenchError, Result};
use crate::progress;
use figures::{Figures, Side};

pub fn run(common: &Common, args: &CompareArgs) -> Result<()> {
    let repo = build::repo_root()?;
    let cache = args.cache.clone().unwrap_or_else(build::default_cache);
    let base = build::Source::commit(&repo, &args.base)?;
    let head = match &args.head {
        Some(r) => build::Source::commit(&repo, r)?,
        None => build::Source::WorkTree(repo.clone()),
    };
    println!("compare: base {}, head {}", base.describe(), head.describe());
    println!("cache: {}", cache.display());
    let bins = [build::binary(&base, &cache)?, build::binary(&head, &cache)?];

    let out = common.out.join("compare");
    std::fs::create_dir_all(&out)?;
    let mut figs = Figures::default();
    let steps = args.rounds * 2;
    let pb = progress::bar("compare", steps as u64);
    for round in 0..args.rounds {
        // Alternate which side goes first, so neither always runs on a
        // machine warmed (or heated) by the other.
        let order = if round % 2 == 0 { [Side::Base, Side::Head] } else { [Side::Head, Side::Base] };
        for side in order {
            pb.set_message(format!("round {} of {}: {}", round + 1, args.rounds, side.name()));
            let dir = out.join(format!("round{round}-{}", side.name()));
            measure(&bins[side.index()], &dir, common, args)?;
            figs.read_round(side, &dir)?;
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let table = figs.render(args.rounds);
    println!("\n{table}");
    figs.write_csv(&out.join("compare.csv"))?;
    println!("per-figure medians in {}", out.join("compare.csv").display());
    Ok(())
}

/// One round of one side: `micro` and the `faa` slice, each a child run of
/// that side's binary writing its CSV files to `dir`.
fn measure(bin: &Path, dir: &Path, common: &Common, args: &CompareArgs) -> Result<()> {
    let mut shared: Vec<String> = vec!["--quick".into(), "--no-plots".into(), "--out".into(), path_arg(dir)];
    if let Some(t) = common.threads {
        shared.push("--threads".into());
        shared.push(t.to_string());
    }
    let objects = args.objects.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let mut faa: Vec<String> = vec!["faa".into(), "--objects".into(), objects, "--dist".into(), "uniform".into()];
    if !args.variants.is_empty() {
        faa.push("--variants".into());
        faa.push(args.variants.join(","));
    }
    for sub in [vec!["micro".to_string()], faa] {
        let out = Command::new(bin)
            .args(&shared)
            .args(&sub)
            .output()
            .map_err(|e| BenchError::Other(format!("cannot run {}: {e}", bin.display())))?;
        if !out.status.success() {
            return Err(BenchError::Other(format!(
                "{} {} failed ({}):\n{}",
                bin.display(),
                sub.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )));
        }
    }
    Ok(())
}

fn path_arg(p: &Path) -> String {
    PathBuf::from(p).display().to_string()
}
