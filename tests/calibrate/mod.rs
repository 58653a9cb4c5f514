//! Calibration: the fit recovers known parameters exactly from synthetic
//! data, the written topology loads, and a small real run has the right
//! structure (its timings are not asserted: CI machines are loaded).

mod fit;
mod measured;
mod real;
