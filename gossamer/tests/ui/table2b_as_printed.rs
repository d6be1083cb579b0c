// Table II(b) of the thesis as printed: a `HashMap<&str, &str>` property,
// whose `insert` returns `Option<&str>`, a reference that cannot be a
// delegated result.
use std::collections::HashMap;

fn main() {
    gossamer::main(gsm_main, 4);
}

fn gsm_main() {
    let property = HashMap::new();
    let trust = gossamer::entrust(property);
    gossamer::spawn(move || {
        trust.apply(|property| property.insert("Greeting", "Hello"));
    });
}
