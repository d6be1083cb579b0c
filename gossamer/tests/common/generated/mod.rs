//! Randomized programs over the public API (entrust, apply and its `then`
//! and `with` forms, launch, clone, drop, spawn and join, shutdown) with
//! a model of their effects, for `tests/generated_programs.rs`.

pub mod program;
pub mod property;
pub mod run;
