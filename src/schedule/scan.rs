//! Cuts a JSON text into values without parsing them, so that each value (a step of a schedule
//! file) is parsed from memory: serde_json parses a slice several times faster than a reader,
//! whose every byte it passes through a position tracker.
//!
//! The scanner knows the JSON grammar only as far as finding where a value ends (strings with
//! their escapes, nested brackets); the parser of each cut value checks the rest. It counts lines
//! and columns so that errors point into the file as serde_json's would.

use std::io::BufRead;

/// A place in the text: 1-based line and column (in bytes), as serde_json reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    /// Where a place reported by serde_json inside a value cut out at `self` lies in the file.
    pub fn within(self, line: usize, column: usize) -> Pos {
        if line <= 1 {
            Pos { line: self.line, column: self.column + column.saturating_sub(1) }
        } else {
            Pos { line: self.line + line - 1, column }
        }
    }
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "line {} column {}", self.line, self.column)
    }
}

/// Why scanning stopped.
#[derive(Debug)]
pub(super) enum ScanError {
    Io(std::io::Error),
    /// The text ended inside a value.
    Eof(Pos),
}

/// A reader of JSON text, value by value (module docs).
pub(super) struct Scanner<R> {
    reader: R,
    /// The place of the next byte.
    pos: Pos,
}

impl<R: BufRead> Scanner<R> {
    pub fn new(reader: R) -> Self {
        Scanner { reader, pos: Pos { line: 1, column: 1 } }
    }

    /// The place of the next byte.
    pub fn pos(&self) -> Pos {
        self.pos
    }

    /// Skips white space; the next byte, not consumed (`None` at the end of the text).
    pub fn peek(&mut self) -> Result<Option<u8>, ScanError> {
        loop {
            let buf = self.reader.fill_buf().map_err(ScanError::Io)?;
            let Some(&b) = buf.first() else { return Ok(None) };
            match b {
                b' ' | b'\t' | b'\r' => self.pos.column += 1,
                b'\n' => self.pos = Pos { line: self.pos.line + 1, column: 1 },
                _ => return Ok(Some(b)),
            }
            self.reader.consume(1);
        }
    }

    /// Consumes the byte that [`Scanner::peek`] returned (not a newline).
    pub fn bump(&mut self) {
        self.reader.consume(1);
        self.pos.column += 1;
    }

    /// Appends the next value's text to `out` (cleared first) and returns where it starts. A
    /// string, an object or an array ends at its closing byte; anything else (a number, `true`,
    /// ...) at the first white space or `,`, `]`, `}`.
    pub fn value(&mut self, out: &mut Vec<u8>) -> Result<Pos, ScanError> {
        out.clear();
        let start = match self.peek()? {
            Some(_) => self.pos,
            None => return Err(ScanError::Eof(self.pos)),
        };
        let mut state = State { depth: 0, in_string: false, escaped: false, scalar: false };
        loop {
            let buf = self.reader.fill_buf().map_err(ScanError::Io)?;
            if buf.is_empty() {
                return if state.scalar { Ok(start) } else { Err(ScanError::Eof(self.pos)) };
            }
            let (taken, done, newlines, line_start) = state.advance(buf);
            out.extend_from_slice(&buf[..taken]);
            self.pos.line += newlines;
            self.pos.column = match line_start {
                Some(s) => taken - s + 1,
                None => self.pos.column + taken,
            };
            self.reader.consume(taken);
            if done {
                return Ok(start);
            }
        }
    }
}

/// Where the scan of a value is, between buffers.
struct State {
    depth: usize,
    in_string: bool,
    escaped: bool,
    scalar: bool,
}

/// Byte classes for [`State::advance`]: most bytes of a schedule (digits, commas) are `PLAIN`.
const PLAIN: u8 = 0;
const OPEN: u8 = 1;
const CLOSE: u8 = 2;
const QUOTE: u8 = 3;
const NEWLINE: u8 = 4;
const BLANK: u8 = 5;
const PUNCT: u8 = 6;

const CLASS: [u8; 256] = {
    let mut c = [PLAIN; 256];
    c[b'{' as usize] = OPEN;
    c[b'[' as usize] = OPEN;
    c[b'}' as usize] = CLOSE;
    c[b']' as usize] = CLOSE;
    c[b'"' as usize] = QUOTE;
    c[b'\n' as usize] = NEWLINE;
    c[b' ' as usize] = BLANK;
    c[b'\t' as usize] = BLANK;
    c[b'\r' as usize] = BLANK;
    c[b',' as usize] = PUNCT;
    c[b':' as usize] = PUNCT;
    c
};

impl State {
    /// Scans `buf`: (bytes that belong to the value, whether it ended there, newlines in them,
    /// where the last line in them starts).
    fn advance(&mut self, buf: &[u8]) -> (usize, bool, usize, Option<usize>) {
        let mut newlines = 0;
        let mut line_start = None;
        let mut i = 0;
        while i < buf.len() {
            let b = buf[i];
            if self.in_string {
                // Inside a string only the quote, the backslash and newlines matter.
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => {
                        self.in_string = false;
                        if self.depth == 0 {
                            return (i + 1, true, newlines, line_start);
                        }
                    }
                    b'\n' => {
                        newlines += 1;
                        line_start = Some(i + 1);
                    }
                    _ => {}
                }
                i += 1;
                continue;
            }
            let class = CLASS[b as usize];
            if self.scalar {
                if class != PLAIN && class != QUOTE && class != OPEN {
                    return (i, true, newlines, line_start);
                }
                i += 1;
                continue;
            }
            match class {
                PLAIN if self.depth == 0 => self.scalar = true,
                PLAIN | BLANK | PUNCT => {}
                OPEN => self.depth += 1,
                CLOSE => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return (i + 1, true, newlines, line_start);
                    }
                }
                QUOTE => self.in_string = true,
                _ => {
                    newlines += 1;
                    line_start = Some(i + 1);
                }
            }
            i += 1;
        }
        (buf.len(), false, newlines, line_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<(String, Pos)> {
        let mut s = Scanner::new(text.as_bytes());
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while s.peek().unwrap().is_some() {
            let at = s.value(&mut buf).unwrap();
            out.push((String::from_utf8(buf.clone()).unwrap(), at));
            if s.peek().unwrap() == Some(b',') {
                s.bump();
            }
        }
        out
    }

    #[test]
    fn values_end_where_json_says() {
        let got = values("{\"a\": [1, \"]\\\"\"]},\n  12.5e3 ,true\n,\"x\\\\\"\n[[],{}]");
        let texts: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(texts, ["{\"a\": [1, \"]\\\"\"]}", "12.5e3", "true", "\"x\\\\\"", "[[],{}]"]);
        let places: Vec<(usize, usize)> = got.iter().map(|(_, p)| (p.line, p.column)).collect();
        assert_eq!(places, [(1, 1), (2, 3), (2, 11), (3, 2), (4, 1)]);
    }

    #[test]
    fn places_follow_lines_inside_values() {
        let mut s = Scanner::new("[1,\n 2]\n  7".as_bytes());
        let mut buf = Vec::new();
        s.value(&mut buf).unwrap();
        assert_eq!(s.pos(), Pos { line: 2, column: 4 });
        assert_eq!(s.value(&mut buf).unwrap(), Pos { line: 3, column: 3 });
        // serde_json's place inside the first value, mapped to the file.
        assert_eq!(Pos { line: 1, column: 1 }.within(2, 2), Pos { line: 2, column: 2 });
        assert_eq!(Pos { line: 3, column: 3 }.within(1, 1), Pos { line: 3, column: 3 });
    }

    #[test]
    fn a_cut_off_value_is_an_error() {
        for text in ["[1, 2", "{\"a\": \"b", "\"abc"] {
            let mut s = Scanner::new(text.as_bytes());
            assert!(matches!(s.value(&mut Vec::new()), Err(ScanError::Eof(_))), "{text}");
        }
    }
}
