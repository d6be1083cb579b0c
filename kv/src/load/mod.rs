//! The load generator.
