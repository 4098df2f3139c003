//! [`CliError`]: how a command fails, and the exit code that failure maps to.
//!
//! Every command returns `Result<(), CliError>`; `main` prints the message once, on stderr, and
//! exits with the code, so a command never prints its own error nor picks a number. The codes
//! are the ones main.rs documents: 1 the command ran and found failures (or an operation it
//! needed failed: the database, the broker, a file it writes), 2 bad input (a setting, an
//! argument, a malformed file).

use std::fmt;

/// A failed command: the exit code's meaning and the line to print (none when the command's
/// own output already shows what failed, as an eval's report does).
#[derive(Debug)]
pub struct CliError {
    kind: Kind,
    message: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Exit 1.
    Failed,
    /// Exit 2.
    BadInput,
}

impl CliError {
    /// The command ran and found failures, or an operation it needed failed (exit 1).
    pub fn failed(message: impl Into<String>) -> Self {
        CliError { kind: Kind::Failed, message: Some(message.into()) }
    }

    /// Bad input: a setting, an argument or a file the command cannot use (exit 2).
    pub fn bad_input(message: impl Into<String>) -> Self {
        CliError { kind: Kind::BadInput, message: Some(message.into()) }
    }

    /// Failures the command's output (or its log) already reports: exit 1 with nothing more
    /// to print.
    pub fn reported() -> Self {
        CliError { kind: Kind::Failed, message: None }
    }

    /// The process exit code.
    pub fn code(&self) -> u8 {
        match self.kind {
            Kind::Failed => 1,
            Kind::BadInput => 2,
        }
    }

    /// The line `main` prints on stderr, if any.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message.as_deref().unwrap_or("failed (see the output above)"))
    }
}

impl std::error::Error for CliError {}

/// Turns an error into a [`CliError`] whose message is `"{context}: {error}"`, the form every
/// command's messages take (`load-agent cost: ...`).
pub trait OrExit<T> {
    /// Exit 1 on error.
    fn or_fail(self, context: impl fmt::Display) -> Result<T, CliError>;
    /// Exit 2 on error.
    fn or_bad_input(self, context: impl fmt::Display) -> Result<T, CliError>;
}

impl<T, E: fmt::Display> OrExit<T> for Result<T, E> {
    fn or_fail(self, context: impl fmt::Display) -> Result<T, CliError> {
        self.map_err(|e| CliError::failed(format!("{context}: {e}")))
    }

    fn or_bad_input(self, context: impl fmt::Display) -> Result<T, CliError> {
        self.map_err(|e| CliError::bad_input(format!("{context}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::{CliError, OrExit};

    #[test]
    fn each_kind_maps_to_its_exit_code_and_keeps_its_message() {
        assert_eq!(CliError::failed("x").code(), 1);
        assert_eq!(CliError::bad_input("x").code(), 2);
        assert_eq!(CliError::reported().code(), 1);
        assert_eq!(CliError::reported().message(), None);
        let e = Err::<(), _>("no such file").or_bad_input("load-agent sop check").err();
        assert_eq!(e.as_ref().and_then(CliError::message), Some("load-agent sop check: no such file"));
        assert_eq!(e.map(|e| e.code()), Some(2));
    }
}
