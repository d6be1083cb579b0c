//! Figure 2a of the thesis: two threads increment one entrusted counter.
//! The spawned fiber runs on the other worker thread, so its `apply` is a
//! real delegation request to the trustee; the main fiber's `apply` takes
//! the local-trustee shortcut.

use gossamer::{JoinError, Runtime};

fn main() -> Result<(), JoinError> {
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    let value = rt.block_on(|| -> Result<i32, JoinError> {
        let ct = gossamer::local_trustee().entrust(17);
        let ct2 = ct.clone();
        let thread = gossamer::spawn_on(1, move || {
            ct2.apply(|c| *c += 1);
        });
        ct.apply(|c| *c += 1);
        thread.join()?;
        assert!(ct.apply(|c| *c) == 19);
        Ok(ct.apply(|c| *c))
    })?;
    println!("figure 2a: two threads each added 1 to 17 through Trust<i32>: {value}");
    Ok(())
}
