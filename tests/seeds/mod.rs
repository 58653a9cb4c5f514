//! Seed parity: each element of the seed documents (TF DTensor Mesh, TVM
//! Relax distributed and VirtualDevice) with a test named after it.

mod dtensor;
mod tvm;
