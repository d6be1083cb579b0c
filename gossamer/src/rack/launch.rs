//! Who we are in the program, and starting the other processes.
//!
//! A process learns its rank and the program's size, in order, from
//! `GOSSAMER_RANK`/`GOSSAMER_SIZE` (set by the embedded launcher, or by any
//! launcher of your own), from Slurm (`SLURM_PROCID`/`SLURM_NTASKS`), or
//! from Open MPI (`OMPI_COMM_WORLD_RANK`/`OMPI_COMM_WORLD_SIZE`); the latter
//! two need `GOSSAMER_RENDEZVOUS`, where rank 0 listens: the path of a Unix
//! socket, or `host:port` for TCP. A process started with none of these is
//! rank 0 of a program whose size is `GOSSAMER_PROCESSES` or the
//! `--gossamer-processes N` argument (default 1), and it starts the other
//! ranks itself by running its own executable again, with the same
//! arguments.
//!
//! Every rank of a program of several processes needs the program's secret
//! (see `rack::secret`): rank 0 accepts only processes that prove they know
//! it. The embedded launcher makes a fresh secret for each program and
//! passes it to the processes it starts in `GOSSAMER_SECRET`; under a
//! launcher of your own, set `GOSSAMER_SECRET_FILE` (a file only you can
//! read) or `GOSSAMER_SECRET` for every rank, or the rank refuses to start.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::{Child, Command};

use super::secret;
use super::stream::Rendezvous;
use super::RackError;

/// This process's place in the program.
#[derive(Debug, Clone)]
pub(crate) struct Role {
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) rendezvous: Rendezvous,
    /// Rank 0 starts the others.
    pub(crate) embedded: bool,
    /// The program's secret (programs of several processes only).
    pub(crate) secret: Option<Vec<u8>>,
}

fn env_usize(name: &str) -> Result<Option<usize>, RackError> {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().map(Some).map_err(|_| RackError::Config(format!("{name}={v:?} is not a number"))),
        Err(_) => Ok(None),
    }
}

fn processes_arg() -> Result<Option<usize>, RackError> {
    let args: Vec<String> = std::env::args().collect();
    for (i, a) in args.iter().enumerate() {
        let v = if let Some(v) = a.strip_prefix("--gossamer-processes=") {
            Some(v.to_string())
        } else if a == "--gossamer-processes" {
            args.get(i + 1).cloned()
        } else {
            None
        };
        if let Some(v) = v {
            return v
                .parse()
                .map(Some)
                .map_err(|_| RackError::Config(format!("--gossamer-processes {v:?} is not a number")));
        }
    }
    Ok(None)
}

/// The error of a rank started by a launcher without `GOSSAMER_RENDEZVOUS`,
/// with a value to set: rank 0's host and a port, passed the way this
/// launcher passes variables.
fn no_rendezvous(rank_var: &str, size_var: &str, rank: usize) -> RackError {
    let here = super::host_name();
    let host = if rank == 0 { here.clone() } else { "<rank 0's host>".to_string() };
    let how = match rank_var {
        "OMPI_COMM_WORLD_RANK" => format!(
            "with mpirun, pass it to every rank: `mpirun -x GOSSAMER_RENDEZVOUS={host}:7000 -x GOSSAMER_SECRET_FILE ...`"
        ),
        "SLURM_PROCID" => "under Slurm, export it before srun, naming the first node of the allocation: \
             `export GOSSAMER_RENDEZVOUS=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1):7000`"
            .to_string(),
        _ => format!("set it for every rank: `GOSSAMER_RENDEZVOUS={host}:7000`"),
    };
    RackError::Config(format!(
        "{rank_var}/{size_var} start this process as rank {rank} of a program of several processes, but \
         GOSSAMER_RENDEZVOUS, the address where rank 0 waits for the others, is not set. Give every rank the \
         same value: rank 0's host name and a free TCP port (or a Unix socket path when all ranks share one \
         host); {how} (this process runs on {here})"
    ))
}

pub(crate) fn detect() -> Result<Role, RackError> {
    let rendezvous = std::env::var_os("GOSSAMER_RENDEZVOUS").filter(|v| !v.is_empty()).map(|v| Rendezvous::parse(&v));
    let external = [
        ("GOSSAMER_RANK", "GOSSAMER_SIZE"),
        ("SLURM_PROCID", "SLURM_NTASKS"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ];
    for (r, s) in external {
        if let (Some(rank), Some(size)) = (env_usize(r)?, env_usize(s)?) {
            if size == 0 || rank >= size {
                return Err(RackError::Config(format!("{r}={rank} does not fit {s}={size}")));
            }
            let rendezvous = match rendezvous {
                Some(p) => p,
                None if size == 1 => Rendezvous::Unix(PathBuf::new()),
                None => return Err(no_rendezvous(r, s, rank)),
            };
            let secret = match secret::from_env()? {
                Some(s) => Some(s),
                None if size == 1 => None,
                None => return Err(secret::missing(r, s)),
            };
            return Ok(Role { rank, size, rendezvous, embedded: false, secret });
        }
    }
    let size = match env_usize("GOSSAMER_PROCESSES")? {
        Some(n) => n,
        None => processes_arg()?.unwrap_or(1),
    };
    if size == 0 {
        return Err(RackError::Config("the process count must be at least 1".into()));
    }
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let rendezvous = rendezvous.unwrap_or_else(|| {
        Rendezvous::Unix(std::env::temp_dir().join(format!("gossamer-{}-{nonce:08x}.sock", std::process::id())))
    });
    // The copies we start learn a fresh secret from us, in their
    // environment: only processes we started know it.
    let secret = if size > 1 { Some(secret::fresh()?.into_bytes()) } else { None };
    Ok(Role { rank: 0, size, rendezvous, embedded: size > 1, secret })
}

/// Starts ranks 1.. as copies of this executable. Each child is killed by
/// the kernel if this process dies (`PR_SET_PDEATHSIG`).
pub(crate) fn spawn_children(role: &Role) -> Result<Vec<Child>, RackError> {
    let exe = std::env::current_exe().map_err(|e| RackError::Launch(format!("cannot find our executable: {e}")))?;
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let parent = std::process::id();
    let secret = role.secret.as_deref().map(|s| std::ffi::OsStr::from_bytes(s).to_os_string()).unwrap_or_default();
    let mut children = Vec::with_capacity(role.size - 1);
    for rank in 1..role.size {
        let mut cmd = Command::new(&exe);
        cmd.args(&args)
            .env("GOSSAMER_RANK", rank.to_string())
            .env("GOSSAMER_SIZE", role.size.to_string())
            .env("GOSSAMER_RENDEZVOUS", role.rendezvous.as_env())
            .env(secret::TEXT_VAR, &secret)
            .env_remove(secret::FILE_VAR)
            .env_remove("GOSSAMER_PROCESSES");
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The parent may have died before the prctl took effect.
                    if libc::getppid() as u32 != parent {
                        libc::_exit(1);
                    }
                    Ok(())
                });
            }
        }
        match cmd.spawn() {
            Ok(c) => children.push(c),
            Err(e) => {
                for mut c in children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(RackError::Launch(format!("cannot start rank {rank}: {e}")));
            }
        }
    }
    Ok(children)
}
