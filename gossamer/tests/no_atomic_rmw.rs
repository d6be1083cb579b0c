//! The delegation fast path uses no atomic read-modify-write: the machine
//! code of its functions in this very test binary holds no `lock`-prefixed
//! instruction and no `xchg`/`cmpxchg`.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use std::process::Command;

/// Demangled-name fragments of the hot-path functions.
const HOT: &[&str] = &[
    "gossamer::channel::",
    "gossamer::runtime::worker::trustee::<impl gossamer::runtime::worker::Worker>::serve",
    "gossamer::runtime::worker::client::<impl gossamer::runtime::worker::Worker>::poll",
    "gossamer::runtime::worker::client::<impl gossamer::runtime::worker::Worker>::flush",
    "gossamer::runtime::worker::client::Lane::fill",
    "gossamer::runtime::worker::client::<impl gossamer::runtime::worker::Worker>::enqueue",
    "gossamer::runtime::worker::Worker::run_ready",
    "gossamer::runtime::worker::Worker::make_ready",
    "gossamer::runtime::worker::client::<impl gossamer::runtime::worker::Worker>::store_then",
    "gossamer::runtime::worker::client::<impl gossamer::runtime::worker::Worker>::take_then",
    "gossamer::trust::property_shim",
    "gossamer::trust::complete_wake",
    "gossamer::trust::complete_then",
    "gossamer::trust::Waiter",
    "gossamer::trust::Trust<T>::apply_unchecked",
    "gossamer::trust::Trust<T>::then_impl",
    "gossamer::runtime::shared::Shared::wake",
];

/// Names of read-modify-write operations in `core::sync::atomic`.
const RMW: &[&str] = &[
    "fetch_",
    "swap",
    "compare_exchange",
    "atomic_add",
    "atomic_sub",
    "atomic_xchg",
    "atomic_cxchg",
    "atomic_and",
    "atomic_or",
    "atomic_xor",
    "atomic_nand",
    "atomic_max",
    "atomic_min",
    "atomic_umax",
    "atomic_umin",
];

#[test]
fn hot_path_machine_code_has_no_locked_instructions() {
    // Make sure the generic hot path is instantiated in this binary.
    let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
    rt.block_on(|| {
        let t = gossamer::trustee(1).entrust(0u64);
        t.apply(|v| *v += 1);
        t.apply_then(|v| *v, |_| ());
        t.apply(|_| ());
    });
    drop(rt);

    let exe = std::env::current_exe().unwrap();
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-C"])
        .arg(&exe)
        .output()
        .expect("objdump (binutils) is needed for this test");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut current: Option<String> = None;
    let mut checked = 0;
    let mut found = vec![false; HOT.len()];
    let mut bad = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_suffix(">:") {
            let name = name.split_once('<').map(|x| x.1).unwrap_or(name);
            for (i, h) in HOT.iter().enumerate() {
                found[i] |= name.contains(h);
            }
            current = HOT.iter().any(|h| name.contains(h)).then(|| name.to_string());
            if current.is_some() {
                checked += 1;
            }
            continue;
        }
        if let Some(f) = &current {
            let ins = line.split('\t').nth(1).unwrap_or("").trim();
            let locked = ins.starts_with("lock") || ins.starts_with("xchg") || ins.starts_with("cmpxchg");
            // Unoptimised builds call out to the atomic intrinsics' wrappers.
            let rmw_call =
                ins.starts_with("call") && ins.contains("core::sync::atomic::") && RMW.iter().any(|r| ins.contains(r));
            if locked || rmw_call {
                bad.push(format!("{f}: {ins}"));
            }
        }
    }
    assert!(checked >= 10, "found only {checked} hot-path functions to check");
    let missing: Vec<_> = HOT.iter().zip(&found).filter(|(_, f)| !**f).map(|(h, _)| *h).collect();
    assert!(missing.is_empty(), "hot-path functions not found in the binary (renamed?): {missing:?}");
    assert!(bad.is_empty(), "atomic read-modify-write on the hot path:\n{}", bad.join("\n"));
}
