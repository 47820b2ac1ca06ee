//! A fast path for parsing one step's text: the schedule file v1 step (docs/design/FORMATS.md)
//! with plain non-negative integers, keys in any order and any spacing, parsed without serde's
//! per-value dispatch (serde_json spent most of a large file's reading in it).
//!
//! It answers only where it is sure: anything else (an unknown or repeated key, an escape in a
//! string, a number that is not a plain `u32`, a piece id of the wrong length) gives `None`, and
//! the caller parses the text with serde, which returns the same step or the error with its
//! place. A property test holds the two to the same answers.

use super::{Op, Step, Transfer};
use crate::collective::PieceId;
use crate::topology::LinkId;

/// The step the text holds, or `None` to let serde decide (module docs).
pub(super) fn parse_step(text: &[u8]) -> Option<Step> {
    let mut p = Cursor { text, at: 0 };
    p.byte(b'{')?;
    if p.string()? != b"transfers" {
        return None;
    }
    p.byte(b':')?;
    let transfers = p.items(Cursor::transfer)?;
    p.byte(b'}')?;
    p.blank();
    (p.at == text.len()).then_some(Step { transfers })
}

struct Cursor<'a> {
    text: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    /// Skips JSON white space.
    fn blank(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    /// `b` after white space.
    fn byte(&mut self, b: u8) -> Option<()> {
        self.blank();
        (self.text.get(self.at) == Some(&b)).then(|| self.at += 1)
    }

    /// Whether `b` comes next (after white space), consuming it if so.
    fn takes(&mut self, b: u8) -> bool {
        self.byte(b).is_some()
    }

    /// A string without escapes.
    fn string(&mut self) -> Option<&[u8]> {
        self.byte(b'"')?;
        let start = self.at;
        let len = self.text[start..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        self.at = start + len;
        self.byte(b'"')?;
        Some(&self.text[start..start + len])
    }

    /// A JSON number that is a `u32`: digits, no leading zero, no fraction or exponent.
    fn number(&mut self) -> Option<u32> {
        self.blank();
        let start = self.at;
        let mut value: u32 = 0;
        while let Some(&d) = self.text.get(self.at).filter(|d| d.is_ascii_digit()) {
            value = value.checked_mul(10)?.checked_add((d - b'0') as u32)?;
            self.at += 1;
        }
        let digits = self.at - start;
        let leading_zero = digits > 1 && self.text[start] == b'0';
        let more = matches!(self.text.get(self.at), Some(b'.' | b'e' | b'E'));
        (digits > 0 && !leading_zero && !more).then_some(value)
    }

    /// `[item, item, ...]` (possibly empty).
    fn list(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.byte(b'[')?;
        if self.takes(b']') {
            return Some(());
        }
        loop {
            item(self)?;
            if self.takes(b']') {
                return Some(());
            }
            self.byte(b',')?;
        }
    }

    /// `[item, item, ...]` collected.
    fn items<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let mut out = Vec::new();
        self.list(|p| {
            out.push(item(p)?);
            Some(())
        })?;
        Some(out)
    }

    fn transfer(&mut self) -> Option<Transfer> {
        self.byte(b'{')?;
        let (mut path, mut op, mut pieces) = (None, None, None);
        loop {
            match self.string()? {
                b"path" if path.is_none() => {
                    self.byte(b':')?;
                    path = Some(self.items(|p| p.number().map(LinkId))?);
                }
                b"op" if op.is_none() => {
                    self.byte(b':')?;
                    op = Some(match self.string()? {
                        b"copy" => Op::Copy,
                        b"reduce" => Op::Reduce,
                        _ => return None,
                    });
                }
                b"pieces" if pieces.is_none() => {
                    self.byte(b':')?;
                    pieces = Some(self.items(Cursor::piece)?);
                }
                _ => return None,
            }
            if self.takes(b'}') {
                break;
            }
            self.byte(b',')?;
        }
        Some(Transfer { path: path?, op: op?, pieces: pieces? })
    }

    fn piece(&mut self) -> Option<PieceId> {
        let mut parts = [0u32; 3];
        let mut n = 0;
        self.list(|p| {
            *parts.get_mut(n)? = p.number()?;
            n += 1;
            Some(())
        })?;
        PieceId::from_parts(&parts[..n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn serde_step(text: &[u8]) -> Option<Step> {
        serde_json::from_slice(text).ok()
    }

    const WRITTEN: &str = r#"{"transfers": [{"path": [0], "op": "copy", "pieces": [[0,1,0], [0,9,0]]}, {"path": [12, 7], "op": "reduce", "pieces": [[3,1]]}]}"#;

    #[test]
    fn what_the_writer_writes_is_read_fast() {
        let step = parse_step(WRITTEN.as_bytes()).expect("the fast path reads the writer's layout");
        assert_eq!(Some(step.clone()), serde_step(WRITTEN.as_bytes()));
        assert_eq!(step.transfers[1].path, [LinkId(12), LinkId(7)]);
        assert_eq!(step.transfers[1].pieces, [PieceId::block(3, 1)]);
    }

    #[test]
    fn what_it_is_unsure_of_goes_to_serde() {
        for text in [
            r#"{"transfers": [{"path": [0], "op": "copy", "pieces": [[0,1,0]], "x": 1}]}"#,
            r#"{"transfers": [{"path": [0], "path": [1], "op": "copy", "pieces": []}]}"#,
            r#"{"transfers": [{"path": [01], "op": "copy", "pieces": []}]}"#,
            r#"{"transfers": [{"path": [1.0], "op": "copy", "pieces": []}]}"#,
            r#"{"transfers": [{"path": [4294967296], "op": "copy", "pieces": []}]}"#,
            r#"{"transfers": [{"path": [0], "op": "cop\u0079", "pieces": []}]}"#,
            r#"{"transfers": [{"path": [0], "op": "copy", "pieces": [[1,2,3,4]]}]}"#,
            r#"{"transfers": [{"path": [0], "op": "copy"}]}"#,
            r#"{"transfers": [,]}"#,
            r#"{"transfers": []} x"#,
        ] {
            assert_eq!(parse_step(text.as_bytes()), None, "{text}");
        }
    }

    fn json_token() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(" ".to_string()),
            Just(",".to_string()),
            Just("[".to_string()),
            Just("]".to_string()),
            Just("\"".to_string()),
            Just("0".to_string()),
            Just("-".to_string()),
            Just("e".to_string()),
            Just("\"op\"".to_string()),
            (0u64..5_000_000_000).prop_map(|n| n.to_string()),
        ]
    }

    proptest! {
        /// Whatever the text, a fast answer is serde's answer.
        #[test]
        fn a_fast_answer_is_serdes_answer(cut in 0usize..WRITTEN.len(), len in 0usize..4, token in json_token()) {
            let end = (cut + len).min(WRITTEN.len());
            let text = format!("{}{}{}", &WRITTEN[..cut], token, &WRITTEN[end..]);
            if let Some(step) = parse_step(text.as_bytes()) {
                prop_assert_eq!(Some(step), serde_step(text.as_bytes()), "{}", text);
            }
        }
    }
}
