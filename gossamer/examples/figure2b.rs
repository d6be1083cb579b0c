//! Figure 2b of the thesis: the same program as Figure 2a with standard
//! Rust primitives (`Arc<Mutex<i32>>` and an OS thread), printed side by
//! side with the `Trust<T>` version so the two can be compared.

use std::error::Error;
use std::sync::{Arc, Mutex};
use std::thread::spawn;

fn with_mutex() -> Result<i32, Box<dyn Error>> {
    let cm = Arc::new(Mutex::new(17));
    let cm2 = cm.clone();
    let thread = spawn(move || {
        *(cm2.lock().unwrap()) += 1;
    });
    *(cm.lock().map_err(|e| e.to_string())?) += 1;
    thread.join().map_err(|_| "thread panicked")?;
    let v = *cm.lock().map_err(|e| e.to_string())?;
    assert!(v == 19);
    Ok(v)
}

fn with_trust() -> Result<i32, Box<dyn Error>> {
    let rt = gossamer::Runtime::builder().workers(2).build()?;
    Ok(rt.block_on(|| -> Result<i32, gossamer::JoinError> {
        let ct = gossamer::local_trustee().entrust(17);
        let ct2 = ct.clone();
        let thread = gossamer::spawn_on(1, move || {
            ct2.apply(|c| *c += 1);
        });
        ct.apply(|c| *c += 1);
        thread.join()?;
        Ok(ct.apply(|c| *c))
    })?)
}

fn main() -> Result<(), Box<dyn Error>> {
    println!("figure 2b: Arc<Mutex<i32>> and std::thread: {}", with_mutex()?);
    println!("figure 2a: Trust<i32> and gossamer fibers: {}", with_trust()?);
    Ok(())
}
