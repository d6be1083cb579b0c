//! Table II(b) of the thesis: the Table II(a) program written for Gossamer.
//! `gossamer::main` starts the program (several processes when asked:
//! `GOSSAMER_PROCESSES=2 cargo run --example table2b`), rank 0 runs
//! `gsm_main`, and a fiber on the last thread of the program — in the last
//! process — inserts the greeting through the trust.

use std::collections::HashMap;

fn gsm_main() {
    let property: HashMap<String, String> = HashMap::new();
    let trust = gossamer::entrust(property);
    let last = gossamer::topology().threads() - 1;
    // On stable Rust the trust travels as the fiber's argument.
    gossamer::spawn_with(
        last,
        |trust: gossamer::Trust<HashMap<String, String>>| {
            trust.apply_with(|property, (k, v)| property.insert(k, v), ("Greeting".to_string(), "Hello".to_string()));
        },
        trust.clone(),
    )
    .join()
    .expect("the fiber panicked");
    let greeting = trust.apply_with(|property, ()| property.get("Greeting").cloned(), ());
    println!(
        "table II(b): {} processes; a fiber on thread {last} (rank {}) stored Greeting = {:?} in rank 0's property",
        gossamer::topology().processes.len(),
        gossamer::topology().rank_of(last),
        greeting.expect("inserted")
    );
}

fn main() {
    gossamer::main(gsm_main, 4);
}
