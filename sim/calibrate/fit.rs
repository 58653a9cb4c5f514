//! Linear least squares with non-negative coefficients (times and rates
//! cannot be negative): the normal equations solved by Gaussian elimination
//! with partial pivoting; a coefficient that comes out negative is fixed at
//! zero and the rest refitted (the active-set idea of Lawson-Hanson, enough
//! for the handful of columns here). Columns are scaled to unit norm first so
//! seconds-per-byte and seconds-per-call terms are conditioned alike.

/// Why a fit failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    #[error("{rows} measurements for {cols} unknowns: need at least as many measurements")]
    TooFew { rows: usize, cols: usize },
    #[error("the measurements do not tell the unknowns apart (singular system)")]
    Singular,
    #[error("row {0} has a different number of columns")]
    Ragged(usize),
}

/// Solve the square system `a x = b` in place.
pub(crate) fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Result<Vec<f64>, FitError> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
            .expect("rows");
        if a[p][c].abs() < 1e-12 {
            return Err(FitError::Singular);
        }
        a.swap(c, p);
        b.swap(c, p);
        let (top, rest) = a.split_at_mut(c + 1);
        let pivot = &top[c];
        for (r, row) in rest.iter_mut().enumerate() {
            let f = row[c] / pivot[c];
            for (x, p) in row[c..].iter_mut().zip(&pivot[c..]) {
                *x -= f * p;
            }
            b[c + 1 + r] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for c in (0..n).rev() {
        let s: f64 = (c + 1..n).map(|k| a[c][k] * x[k]).sum();
        x[c] = (b[c] - s) / a[c][c];
    }
    Ok(x)
}

/// Unconstrained least squares on the columns in `active`.
fn ls_on(rows: &[Vec<f64>], y: &[f64], active: &[usize]) -> Result<Vec<f64>, FitError> {
    let k = active.len();
    let mut ata = vec![vec![0.0; k]; k];
    let mut aty = vec![0.0; k];
    for (r, &t) in rows.iter().zip(y) {
        for i in 0..k {
            aty[i] += r[active[i]] * t;
            for j in 0..k {
                ata[i][j] += r[active[i]] * r[active[j]];
            }
        }
    }
    solve(ata, aty)
}

/// Coefficients `x >= 0` minimising `sum (rows[i] . x - y[i])^2`.
pub fn least_squares(rows: &[Vec<f64>], y: &[f64]) -> Result<Vec<f64>, FitError> {
    let cols = rows.first().map_or(0, Vec::len);
    if let Some(i) = rows.iter().position(|r| r.len() != cols) {
        return Err(FitError::Ragged(i));
    }
    if rows.len() < cols || cols == 0 {
        return Err(FitError::TooFew {
            rows: rows.len(),
            cols,
        });
    }
    let norms: Vec<f64> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c] * r[c]).sum::<f64>().sqrt())
        .collect();
    if norms.contains(&0.0) {
        return Err(FitError::Singular);
    }
    let scaled: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| r.iter().zip(&norms).map(|(v, n)| v / n).collect())
        .collect();
    let mut active: Vec<usize> = (0..cols).collect();
    loop {
        let x = ls_on(&scaled, y, &active)?;
        // Drop the most negative coefficient and refit; done when none is.
        let worst = x
            .iter()
            .enumerate()
            .filter(|(_, v)| **v < 0.0)
            .min_by(|a, b| a.1.total_cmp(b.1));
        match worst {
            Some((i, _)) if active.len() > 1 => {
                active.remove(i);
            }
            Some(_) => return Ok(vec![0.0; cols]),
            None => {
                let mut out = vec![0.0; cols];
                for (i, &c) in active.iter().enumerate() {
                    out[c] = x[i] / norms[c];
                }
                return Ok(out);
            }
        }
    }
}

/// Least squares on relative errors: each row and target divided by the
/// target, so a 10 us point counts as much as a 10 ms one (timings span
/// orders of magnitude). Targets must be positive.
pub fn relative_least_squares(rows: &[Vec<f64>], y: &[f64]) -> Result<Vec<f64>, FitError> {
    let scaled: Vec<Vec<f64>> = rows
        .iter()
        .zip(y)
        .map(|(r, &t)| r.iter().map(|v| v / t).collect())
        .collect();
    least_squares(&scaled, &vec![1.0; y.len()])
}
