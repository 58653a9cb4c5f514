//! Named columns of an nccl-tests-like CSV file: `#` lines are comments, the
//! first other line is the header, fields are trimmed. Every row and every
//! failure of the CSV layer carries its line, and a field its column, so each
//! reader (measured curves for plots, for calibration) states its own
//! `file:line:col` errors over one way of reading the file.

/// A failure of the CSV layer itself (bad quoting, a row with more fields
/// than the header): the line it was found on and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvFault {
    pub line: u64,
    pub message: String,
}

impl CsvFault {
    fn from_csv(e: csv::Error) -> CsvFault {
        CsvFault {
            line: e.position().map_or(1, |p| p.line()),
            message: e.to_string(),
        }
    }
}

/// A CSV file's header and, row by row, its records.
pub struct CsvColumns<'a> {
    reader: csv::Reader<&'a [u8]>,
    header: csv::StringRecord,
    header_line: u64,
}

/// One data row: its line and trimmed fields.
pub struct CsvRow {
    line: u64,
    record: csv::StringRecord,
}

impl<'a> CsvColumns<'a> {
    /// Read the header of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Result<CsvColumns<'a>, CsvFault> {
        let mut reader = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .trim(csv::Trim::All)
            .from_reader(bytes);
        let header = reader.headers().map_err(CsvFault::from_csv)?.clone();
        let header_line = header.position().map_or(1, |p| p.line());
        Ok(CsvColumns {
            reader,
            header,
            header_line,
        })
    }

    /// The line of the header row.
    pub fn header_line(&self) -> u64 {
        self.header_line
    }

    /// The index of the column called `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// The name of column `c` (empty past the last).
    pub fn name(&self, c: usize) -> &str {
        self.header.get(c).unwrap_or("")
    }

    /// The header as written (`size_bytes,busbw_gbs`), for messages.
    pub fn listed(&self) -> String {
        self.header.iter().collect::<Vec<_>>().join(",")
    }

    /// The data rows in order (after the header is done with); the first
    /// fault ends a reader's use of them.
    pub fn into_rows(self) -> impl Iterator<Item = Result<CsvRow, CsvFault>> + 'a {
        self.reader.into_records().map(|r| {
            r.map(|record| CsvRow {
                line: record.position().map_or(0, |p| p.line()),
                record,
            })
            .map_err(CsvFault::from_csv)
        })
    }
}

impl CsvRow {
    /// The row's line in the file.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Field `c`, trimmed (empty when the row is shorter).
    pub fn text(&self, c: usize) -> &str {
        self.record.get(c).unwrap_or("")
    }

    /// The 1-based column where field `c` starts (1 when the row is shorter).
    pub fn column(&self, c: usize) -> usize {
        // Fields are stored without their commas: add one per field before.
        self.record.range(c).map_or(1, |r| r.start + c + 1)
    }
}
