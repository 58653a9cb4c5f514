//! Tensor kernels and .npy I/O: every kernel against numpy-computed fixtures
//! (`tests/fixtures/tensor/manifest.json`, made by `gen.py`), .npy files written
//! by numpy, and properties checked with proptest.

mod cases;
mod errors;
mod npy_files;
mod props;
