//! A byte cursor over UTF-8 text for the hand-written parsers (mesh, sharding, MLIR).
//!
//! Errors carry a 1-based line and column (in characters) and say what was expected
//! and what was found, so every parser reports `line:col: expected X, found Y`.

use std::fmt;

/// A parse error at a position in a text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct TextError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub col: usize,
    /// What the parser was looking for (or what was wrong).
    pub expected: String,
    /// What it found instead, as the user wrote it (shortened).
    pub found: String,
}

impl fmt::Display for TextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: expected {}, found {}",
            self.line, self.col, self.expected, self.found
        )
    }
}

impl TextError {
    /// The same error with a file name in front: `file:line:col: ...`.
    pub fn in_file(&self, file: &str) -> String {
        format!("{file}:{self}")
    }
}

/// A TOML error as `line:col: message` (one line; the toml crate's own text
/// spans several lines with a snippet of the file).
pub fn toml_located(e: &toml::de::Error, src: &str) -> String {
    let message = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let (line, col) = line_col(src, span.start);
            format!("{line}:{col}: {message}")
        }
        None => message,
    }
}

/// Line and column (both 1-based) of byte offset `pos` in `src`.
pub fn line_col(src: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(src.len());
    let before = &src[..floor_char_boundary(src, pos)];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A cursor over a text. Whitespace is skipped explicitly with [`Cursor::ws`];
/// the `eat_*`/`expect_*` helpers skip leading whitespace themselves.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `src`.
    pub fn new(src: &'a str) -> Self {
        Cursor { src, pos: 0 }
    }

    /// A cursor at byte offset `pos` of `src` (errors still count lines from the start).
    pub fn at(src: &'a str, pos: usize) -> Self {
        Cursor {
            src,
            pos: pos.min(src.len()),
        }
    }

    /// The whole text.
    pub fn src(&self) -> &'a str {
        self.src
    }

    /// Current byte offset.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Move to byte offset `pos` (used to backtrack).
    pub fn set_pos(&mut self, pos: usize) {
        self.pos = pos.min(self.src.len());
    }

    /// The text not yet consumed.
    pub fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    /// True when only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.ws();
        self.pos >= self.src.len()
    }

    /// Skip whitespace and `//` line comments.
    pub fn ws(&mut self) {
        loop {
            let rest = self.rest();
            let trimmed = rest.trim_start();
            self.pos += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                let end = trimmed.find('\n').unwrap_or(trimmed.len());
                self.pos += end;
            } else {
                break;
            }
        }
    }

    /// Next character without consuming it (after whitespace).
    pub fn peek(&mut self) -> Option<char> {
        self.ws();
        self.rest().chars().next()
    }

    /// Next character without skipping whitespace.
    pub fn peek_raw(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// Consume `token` if the text continues with it (after whitespace).
    pub fn eat(&mut self, token: &str) -> bool {
        self.ws();
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    /// Consume keyword `word` only if it is not followed by an identifier character.
    pub fn eat_keyword(&mut self, word: &str) -> bool {
        self.ws();
        if let Some(after) = self.rest().strip_prefix(word) {
            if !after.chars().next().is_some_and(is_ident_char) {
                self.pos += word.len();
                return true;
            }
        }
        false
    }

    /// Consume `token` or fail with "expected `token`".
    pub fn expect(&mut self, token: &str) -> Result<(), TextError> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.error(format!("'{token}'")))
        }
    }

    /// An error at the current position: `expected` versus what the text holds here.
    pub fn error(&mut self, expected: impl Into<String>) -> TextError {
        self.ws();
        let pos = self.pos;
        self.error_at(pos, expected)
    }

    /// An error at byte offset `pos`.
    pub fn error_at(&self, pos: usize, expected: impl Into<String>) -> TextError {
        let (line, col) = line_col(self.src, pos);
        TextError {
            line,
            col,
            expected: expected.into(),
            found: describe_found(&self.src[floor_char_boundary(self.src, pos)..]),
        }
    }

    /// An error at `pos` whose "found" part is given (for semantic checks: "unknown axis").
    pub fn error_with(
        &self,
        pos: usize,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> TextError {
        let (line, col) = line_col(self.src, pos);
        TextError {
            line,
            col,
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// A double-quoted string with `\"` and `\\` escapes; returns its contents.
    pub fn string(&mut self) -> Result<String, TextError> {
        self.ws();
        let start = self.pos;
        if !self.rest().starts_with('"') {
            return Err(self.error("a quoted string"));
        }
        let mut out = String::new();
        let mut chars = self.rest()[1..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += 1 + i + 1;
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, e @ ('"' | '\\'))) => out.push(e),
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, h1)) if h1.is_ascii_hexdigit() => {
                        // MLIR's two-hex-digit escape.
                        match chars.next() {
                            Some((_, h2)) if h2.is_ascii_hexdigit() => {
                                let v =
                                    u8::from_str_radix(&format!("{h1}{h2}"), 16).unwrap_or(b'?');
                                out.push(v as char);
                            }
                            _ => return Err(self.error_at(start, "a valid escape in a string")),
                        }
                    }
                    _ => return Err(self.error_at(start, "a valid escape in a string")),
                },
                '\n' => break,
                c => out.push(c),
            }
        }
        Err(self.error_with(start, "a closing '\"'", "an unterminated string"))
    }

    /// A (possibly negative) decimal integer.
    pub fn int(&mut self) -> Result<i64, TextError> {
        self.ws();
        let start = self.pos;
        let rest = self.rest();
        let mut len = 0;
        if rest.starts_with('-') || rest.starts_with('+') {
            len = 1;
        }
        let digits = rest[len..]
            .bytes()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return Err(self.error("an integer"));
        }
        len += digits;
        let text = &rest[..len];
        match text.parse::<i64>() {
            Ok(v) => {
                self.pos += len;
                Ok(v)
            }
            Err(_) => Err(self.error_with(
                start,
                "an integer that fits in 64 bits",
                format!("'{text}'"),
            )),
        }
    }

    /// A non-negative decimal integer.
    pub fn uint(&mut self) -> Result<u64, TextError> {
        self.ws();
        let start = self.pos;
        let rest = self.rest();
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(self.error("a non-negative integer"));
        }
        let text = &rest[..digits];
        match text.parse::<u64>() {
            Ok(v) => {
                self.pos += digits;
                Ok(v)
            }
            Err(_) => Err(self.error_with(
                start,
                "an integer that fits in 64 bits",
                format!("'{text}'"),
            )),
        }
    }

    /// An identifier: letters, digits, `_`, `.`, `$`, `-` after a first letter or `_`.
    pub fn ident(&mut self) -> Result<&'a str, TextError> {
        self.ws();
        let rest = self.rest();
        let mut it = rest.char_indices();
        match it.next() {
            Some((_, c)) if c.is_ascii_alphabetic() || c == '_' => {}
            _ => return Err(self.error("an identifier")),
        }
        let len = rest
            .char_indices()
            .find(|&(_, c)| !is_ident_char(c))
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        self.pos += len;
        Ok(&rest[..len])
    }
}

/// Characters that may continue an identifier.
pub fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | '-')
}

/// How an error shows the text at its position: the next token, or "end of input".
fn describe_found(rest: &str) -> String {
    let rest = rest.trim_start();
    if rest.is_empty() {
        return "end of input".to_string();
    }
    let first = rest.chars().next().unwrap_or(' ');
    let token: String = if first.is_ascii_alphanumeric() || first == '_' {
        rest.chars()
            .take_while(|&c| is_ident_char(c))
            .take(24)
            .collect()
    } else if first == '"' {
        let body: String = rest
            .chars()
            .skip(1)
            .take_while(|&c| c != '"' && c != '\n')
            .take(24)
            .collect();
        format!("\"{body}\"")
    } else {
        first.to_string()
    };
    format!("'{token}'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }

    #[test]
    fn string_escapes() {
        let mut c = Cursor::new(r#" "a\"b" "#);
        assert_eq!(c.string().unwrap(), "a\"b");
        assert!(c.at_end());
    }

    #[test]
    fn error_names_token() {
        let mut c = Cursor::new("  foo");
        let e = c.expect("[").unwrap_err();
        assert_eq!(e.to_string(), "1:3: expected '[', found 'foo'");
    }
}
