//! Base layer shared by every part: a text cursor with line/column errors, a
//! located reader of CSV columns, and the tensor element types and shapes. Nothing here knows about meshes or programs.

pub mod csv_columns;
pub mod cursor;
pub mod dtype;
pub mod files;
pub mod hostile;

pub use cursor::{Cursor, TextError};
pub use dtype::{DType, TensorType};
