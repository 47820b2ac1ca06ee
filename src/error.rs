//! Errors and the exit codes of the command line (docs/design/CLI.md).

use std::fmt;

/// The stable exit codes of `collsched` (docs/design/CLI.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// Success.
    Ok = 0,
    /// A verification rule failed, or a certificate did not hold.
    RuleFailed = 1,
    /// Unreadable file or invalid input.
    BadInput = 2,
    /// The faults cut a rank off, or the method cannot run on this instance.
    Infeasible = 3,
    /// A time or size limit was reached before the result was proven.
    LimitReached = 4,
}

/// An error that carries its exit code and a message naming the file, field and value.
#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    /// Input that cannot be read or does not make sense (exit 2).
    BadInput(String),
    /// An instance that cannot be solved: a rank cut off by faults, or an algorithm that cannot
    /// run on the fault pattern (exit 3).
    Infeasible(String),
}

impl Error {
    /// Bad input with a message.
    pub fn bad(msg: impl Into<String>) -> Self {
        Error::BadInput(msg.into())
    }

    /// An infeasible instance with a message.
    pub fn infeasible(msg: impl Into<String>) -> Self {
        Error::Infeasible(msg.into())
    }

    /// The exit code this error maps to.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::BadInput(_) => ExitCode::BadInput,
            Error::Infeasible(_) => ExitCode::Infeasible,
        }
    }

    /// Prefixes the message with a context (usually a file name or field path).
    pub fn context(self, ctx: impl fmt::Display) -> Self {
        match self {
            Error::BadInput(m) => Error::BadInput(format!("{ctx}: {m}")),
            Error::Infeasible(m) => Error::Infeasible(format!("{ctx}: {m}")),
        }
    }

    /// The message without its kind.
    pub fn message(&self) -> &str {
        match self {
            Error::BadInput(m) | Error::Infeasible(m) => m,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}

/// Result with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
