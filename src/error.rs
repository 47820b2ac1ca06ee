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
    /// A file could not be written (permissions, a full disk): nothing is left behind.
    Io = 5,
    /// A bug in collsched: a check of our own output failed. Please report it.
    Internal = 6,
}

/// An error that carries its exit code and a message naming the file, field and value.
#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    /// Input that cannot be read or does not make sense (exit 2).
    BadInput(String),
    /// An instance that cannot be solved: a rank cut off by faults, or an algorithm that cannot
    /// run on the fault pattern (exit 3).
    Infeasible(String),
    /// A time or size limit stopped the work before it had an answer (exit 4).
    Limit(String),
    /// Writing a file failed (exit 5).
    Io(String),
    /// A bug: something collsched built failed its own check (exit 6).
    Internal(String),
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

    /// A limit reached with a message.
    pub fn limit(msg: impl Into<String>) -> Self {
        Error::Limit(msg.into())
    }

    /// A failed write with a message.
    pub fn io(msg: impl Into<String>) -> Self {
        Error::Io(msg.into())
    }

    /// A bug with a message.
    pub fn internal(msg: impl Into<String>) -> Self {
        Error::Internal(msg.into())
    }

    /// The exit code this error maps to.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::BadInput(_) => ExitCode::BadInput,
            Error::Infeasible(_) => ExitCode::Infeasible,
            Error::Limit(_) => ExitCode::LimitReached,
            Error::Io(_) => ExitCode::Io,
            Error::Internal(_) => ExitCode::Internal,
        }
    }

    /// Prefixes the message with a context (usually a file name or field path).
    pub fn context(self, ctx: impl fmt::Display) -> Self {
        let with = |m: String| format!("{ctx}: {m}");
        match self {
            Error::BadInput(m) => Error::BadInput(with(m)),
            Error::Infeasible(m) => Error::Infeasible(with(m)),
            Error::Limit(m) => Error::Limit(with(m)),
            Error::Io(m) => Error::Io(with(m)),
            Error::Internal(m) => Error::Internal(with(m)),
        }
    }

    /// The message without its kind.
    pub fn message(&self) -> &str {
        match self {
            Error::BadInput(m) | Error::Infeasible(m) | Error::Limit(m) | Error::Io(m) | Error::Internal(m) => m,
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
