//! What a Rust user would run on one machine instead: a sequential
//! Dijkstra with a binary heap ([`dijkstra`]) and a shared-memory parallel
//! delta-stepping with `rayon` and atomics ([`rayon_delta`]).

pub mod dijkstra;
pub mod rayon_delta;
