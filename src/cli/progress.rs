//! Progress bars and spinners for long runs, drawn on stderr only when stderr is a terminal.
//!
//! docs/design/CLI.md: long runs show progress on a terminal and stay quiet when not on one. A [`Bar`] checks
//! [`std::io::IsTerminal`] once, when it is made; off a terminal (a pipe, a file, a CI log) it is
//! hidden and writes nothing at all, so scripts see exactly the output they saw before.
//!
//! ```text
//! let bar = progress::Bar::spinner("synthesize");
//! bar.set_message(format!("solving {steps} steps"));
//! bar.println("a line that must not tear the bar");
//! bar.finish(); // clears the line; dropping the bar does the same
//! ```

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::borrow::Cow;
use std::io::{IsTerminal, Read};
use std::time::Duration;

/// How often a spinner turns while the work it shows does not report (for example a solver call).
const SPIN_INTERVAL: Duration = Duration::from_millis(120);

/// A progress bar (known length) or spinner (unknown length) on stderr.
///
/// Shows `label`, then the bar or spinner, then a message that [`Bar::set_message`] changes. It
/// clears itself when finished or dropped, so an early return (an error) leaves no half-drawn
/// line behind.
pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar for `len` units of work (rows, items), labelled `label`.
    pub fn new(len: u64, label: impl Into<Cow<'static, str>>) -> Bar {
        Bar::make(Some(len), label, "{prefix} {elapsed:>3} [{bar:24}] {pos}/{len} {wide_msg}")
    }

    /// A bar for `len` bytes (a file being read), labelled `label`; shows the bytes done.
    pub fn bytes(len: u64, label: impl Into<Cow<'static, str>>) -> Bar {
        Bar::make(Some(len), label, "{prefix} {elapsed:>3} [{bar:24}] {bytes}/{total_bytes} {wide_msg}")
    }

    /// A spinner for work of unknown length, labelled `label`. It keeps turning on its own while
    /// the caller is busy, so it shows that a long call is still running.
    pub fn spinner(label: impl Into<Cow<'static, str>>) -> Bar {
        let bar = Bar::make(None, label, "{spinner} {prefix} {elapsed:>3} {wide_msg}");
        if bar.is_drawn() {
            bar.bar.enable_steady_tick(SPIN_INTERVAL);
        }
        bar
    }

    /// A bar that is never drawn: for work too short to show, with the same calls as a real one.
    pub fn hidden() -> Bar {
        Bar { bar: ProgressBar::hidden() }
    }

    fn make(len: Option<u64>, label: impl Into<Cow<'static, str>>, template: &str) -> Bar {
        let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let style = ProgressStyle::with_template(template).expect("a valid progress template").progress_chars("=> ").tick_chars("|/-\\ ");
        let bar = ProgressBar::with_draw_target(len, target).with_style(style).with_prefix(label);
        Bar { bar }
    }

    /// Whether the bar is drawn (stderr is a terminal).
    pub fn is_drawn(&self) -> bool {
        !self.bar.is_hidden()
    }

    /// Advances the bar by `n` units.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Replaces the text after the bar (what is being worked on now).
    pub fn set_message(&self, message: impl Into<Cow<'static, str>>) {
        self.bar.set_message(message);
    }

    /// Writes a line to stderr without tearing the bar (the bar is redrawn below it). Off a
    /// terminal this is a plain `eprintln!`: messages are output, not progress.
    pub fn println(&self, line: impl AsRef<str>) {
        if self.is_drawn() {
            self.bar.suspend(|| eprintln!("{}", line.as_ref()));
        } else {
            eprintln!("{}", line.as_ref());
        }
    }

    /// A reader that advances the bar by the bytes read through it. Put it under any buffering
    /// (`BufReader::new(bar.reader(file))`) so the bar moves once per buffer fill, not per byte.
    pub fn reader<R: Read>(&self, inner: R) -> BarReader<'_, R> {
        BarReader { inner, bar: self }
    }

    /// Ends the bar and clears its line.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}

/// A reader that advances a [`Bar`] by the bytes read through it ([`Bar::reader`]).
pub struct BarReader<'a, R> {
    inner: R,
    bar: &'a Bar,
}

impl<R: Read> Read for BarReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_whatever_the_target() {
        // Under `cargo test` stderr is usually captured, not a terminal; either way the counts hold.
        let bar = Bar::new(10, "rows");
        bar.inc(3);
        bar.set_message("5x5 MATEe");
        assert_eq!(bar.bar.position(), 3);
        let bytes = Bar::bytes(5, "read");
        let mut text = String::new();
        bytes.reader(&b"hello"[..]).read_to_string(&mut text).unwrap();
        assert_eq!((text.as_str(), bytes.bar.position()), ("hello", 5));
        let spin = Bar::spinner("synthesize");
        spin.set_message(String::from("solving"));
        spin.finish();
        bar.finish();
    }
}
