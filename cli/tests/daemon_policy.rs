//! The daemon's policy: it starts only binaries under its `--allow` paths
//! (none without `--allow`), refuses the dynamic loader's variables, refuses
//! to run as root without `--allow-root`, and logs every Start with its argv
//! and the names (never the values) of its variables.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{Client, Daemon, TempDir};
use gossamer_cli::proto::{ClientMsg, DaemonMsg};

fn refused(m: DaemonMsg) -> String {
    match m {
        DaemonMsg::Refused { reason, .. } => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn root_args() -> Vec<&'static str> {
    if common::root() {
        vec!["--allow-root"]
    } else {
        vec![]
    }
}

#[test]
fn only_allowed_binaries_start() {
    let dir = TempDir::new("policy");
    let secret = dir.secret();
    let bin = dir.0.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let allowed = bin.join("true");
    std::fs::copy("/bin/true", &allowed).unwrap();
    std::fs::set_permissions(&allowed, std::fs::Permissions::from_mode(0o755)).unwrap();
    let allowed = allowed.to_str().unwrap();
    let mut args = vec!["--allow", bin.to_str().unwrap()];
    args.extend(root_args());
    let mut daemon = Daemon::start(&[], &common::exe(), &secret, &dir.0.join("daemon.log"), &args);

    let mut c = Client::connect(daemon.addr);
    for outside in ["/bin/true", "/bin/sh"] {
        let r = refused(c.request(&common::start_msg(outside, &["-c", "true"], &[])));
        assert!(r.contains("not allowed") && r.contains("--allow"), "{outside}: {r}");
        let r = refused(c.request(&ClientMsg::Check { binary: outside.into(), sha256: [0; 32] }));
        assert!(r.contains("not allowed"), "{outside}: {r}");
    }
    // A path that leads into the allowed directory only by `..` is judged by where it leads.
    let sneaky = format!("{}/../../../bin/true", bin.display());
    assert!(refused(c.request(&common::start_msg(&sneaky, &[], &[]))).contains("not allowed"));
    let r = refused(c.request(&common::start_msg(allowed, &[], &[("LD_PRELOAD", "/tmp/evil.so")])));
    assert!(r.contains("LD_PRELOAD") && r.contains("--allow-loader-env"), "{r}");
    assert!(!daemon.log().contains("started ranks"), "{}", daemon.log());

    // An allowed binary starts; the log has its argv and variable names, no values.
    let start = common::start_msg(
        allowed,
        &["first-arg", "second arg"],
        &[("GOSSAMER_SECRET", "value-that-must-not-be-logged")],
    );
    assert!(matches!(c.request(&start), DaemonMsg::Started { .. }));
    assert!(c.pump(Duration::from_secs(10), |m| matches!(m, DaemonMsg::Exited { .. })));
    let log = daemon.log();
    let line = log.lines().rfind(|l| l.contains("start requested") && l.contains(allowed)).expect("no Start line");
    assert!(line.contains("first-arg") && line.contains("second arg") && line.contains("GOSSAMER_SECRET"), "{line}");
    assert!(!log.contains("value-that-must-not-be-logged"), "{log}");
    assert!(daemon.alive());
}

#[test]
fn without_allow_nothing_starts_but_status_works() {
    let dir = TempDir::new("policy-none");
    let secret = dir.secret();
    let daemon = Daemon::start(&[], &common::exe(), &secret, &dir.0.join("daemon.log"), &root_args());
    assert!(daemon.log().contains("starts nothing"), "{}", daemon.log());
    let mut c = Client::connect(daemon.addr);
    let r = refused(c.request(&common::start_msg("/bin/true", &[], &[])));
    assert!(r.contains("--allow"), "{r}");
    let r = refused(c.request(&ClientMsg::Check { binary: "/bin/true".into(), sha256: [0; 32] }));
    assert!(r.contains("--allow"), "{r}");
    assert!(matches!(c.request(&ClientMsg::Status), DaemonMsg::Running { .. }));
    let st = std::process::Command::new(common::exe())
        .args(["daemon", "--status", &daemon.addr.to_string(), "--secret-file"])
        .arg(&secret)
        .output()
        .unwrap();
    assert!(st.status.success() && String::from_utf8_lossy(&st.stdout).contains("0 rank(s)"), "{st:?}");
}

#[test]
fn root_needs_allow_root() {
    if !common::root_with(&[]) {
        return;
    }
    let dir = TempDir::new("policy-root");
    let secret = dir.secret();
    let mut cmd = std::process::Command::new(common::exe());
    cmd.args(["daemon", "--listen", "127.0.0.1:0", "--allow", "/bin/true", "--secret-file"]).arg(&secret);
    let mut child = cmd.stderr(std::process::Stdio::piped()).spawn().unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the daemon served as root without --allow-root");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(err.contains("root") && err.contains("--allow-root"), "{err}");
}
