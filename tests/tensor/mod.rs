//! Tensor kernels and .npy I/O: every kernel against numpy-computed fixtures
//! (`tests/fixtures/tensor/manifest.json`, made by `gen.py`), .npy files written
//! by numpy, JAX programs transcribed op by op against JAX's outputs, and
//! properties checked with proptest; the issue-14 kernels (gather ... rng) against
//! JAX/XLA fixtures (`lax_cases`) and their own invariants (`lax_props`).

mod cases;
mod errors;
mod jax_programs;
mod lax_cases;
mod lax_props;
mod npy_files;
mod props;
