//! Criterion benchmarks for the workspace crates live in `benches/`; this library is empty.
