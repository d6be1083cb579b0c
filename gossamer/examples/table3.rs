//! Table III of the thesis: blocking and non-blocking delegation from one
//! fiber, to a property in another process when the program has several
//! (`GOSSAMER_PROCESSES=2 cargo run --example table3`).

use std::collections::HashMap;

fn gsm_main() {
    let property: HashMap<String, String> = HashMap::new();
    // On the last thread of the program: in another process if there is one.
    let trust = gossamer::entrust_on(gossamer::topology().threads() - 1, property);
    gossamer::spawn_with(
        0,
        |trust: gossamer::Trust<HashMap<String, String>>| {
            trust.apply_with(|p, (k, v)| p.insert(k, v), ("First Greeting".to_string(), "Hello".to_string()));
            trust.apply_with_then(
                |p, (k, v)| p.insert(k, v),
                ("Second Greeting".to_string(), "Hi".to_string()),
                |_| println!("table III: added second greeting"),
            );
            trust.apply_with(|p, ()| p.len(), ())
        },
        trust.clone(),
    )
    .join()
    .expect("the fiber panicked");
    let mut all: Vec<(String, String)> = trust.apply_with(|p, ()| p.clone().into_iter().collect(), ());
    all.sort();
    println!("table III: the property (on thread {}) holds {all:?}", trust.trustee().index());
}

fn main() {
    gossamer::main(gsm_main, 2);
}
