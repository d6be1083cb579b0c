//! Table II(a) of the thesis: a pool of worker threads (a gossamer
//! `Runtime`), a `HashMap` entrusted to it, and a fiber spawned on the pool
//! that inserts a greeting.

use std::collections::HashMap;

fn main() -> Result<(), gossamer::Error> {
    let pool = gossamer::Runtime::builder().workers(4).build()?;
    let property: HashMap<&'static str, &'static str> = HashMap::new();
    let trust = pool.entrust(property);
    let t = trust.clone();
    pool.spawn(move || {
        t.apply(|property| {
            property.insert("Greeting", "Hello");
        });
    })
    .join()
    .expect("the fiber panicked");
    let greeting = trust.apply(|property| property.get("Greeting").map(|g| g.to_string()));
    println!(
        "table II(a): the pool's trustee {} holds Greeting = {:?}",
        trust.trustee().index(),
        greeting.expect("inserted")
    );
    Ok(())
}
