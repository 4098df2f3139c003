//! The labeled corpus: JSON Lines in the format of behavior.md §10.
//!
//! ```json
//! {"text": "bout 45 min out", "intent": "eta_given", "lang": "en", "from_role": "driver", "open_ask": "eta_request"}
//! ```
//!
//! `text` and `intent` are required; `lang` (`en`/`es`), `from_role` and
//! `open_ask` are optional context and may be `null`. Blank lines are skipped;
//! other fields are ignored so a line may carry a note.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::features::TriageInput;
use crate::intent::Intent;
use crate::lang::Lang;

/// Where a labeled message came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineOrigin {
    /// The corpus file.
    pub file: PathBuf,
    /// 1-based line number.
    pub line: usize,
}

impl fmt::Display for LineOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One labeled message of the corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabeledMessage {
    /// The message body.
    pub text: String,
    /// The intent a human gave it.
    pub intent: Intent,
    /// The contact's language, if the line says.
    pub lang: Option<Lang>,
    /// The sender's role (`driver`, `carrier_dispatcher`, ...).
    pub from_role: Option<String>,
    /// The type of an ask open for the sender, if any.
    pub open_ask: Option<String>,
    /// File and line, when read from a file.
    pub origin: Option<LineOrigin>,
}

impl LabeledMessage {
    /// A message with no context and no origin (handy in tests).
    pub fn new(text: impl Into<String>, intent: Intent) -> Self {
        LabeledMessage {
            text: text.into(),
            intent,
            lang: None,
            from_role: None,
            open_ask: None,
            origin: None,
        }
    }

    /// The model input for this message, with its context.
    pub fn input(&self) -> TriageInput<'_> {
        TriageInput {
            text: &self.text,
            lang: self.lang.map(Lang::as_str),
            from_role: self.from_role.as_deref(),
            open_ask: self.open_ask.as_deref(),
        }
    }
}

/// What is wrong with one corpus line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineProblem {
    /// The line is not a JSON object.
    #[error("bad JSON: {0}")]
    BadJson(String),
    /// A required field is absent or null.
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    /// A field has the wrong JSON type.
    #[error("field `{field}` must be {expected}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// `text` is empty or only whitespace.
    #[error("field `text` is empty")]
    EmptyText,
    /// `intent` is not an intent id of §6.
    #[error("unknown intent {0:?}")]
    UnknownIntent(String),
    /// `lang` is not `en` or `es`.
    #[error("unknown lang {0:?} (expected \"en\" or \"es\")")]
    UnknownLang(String),
}

/// A corpus file could not be read or a line is malformed.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// The file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is malformed; names the file, the line and what is wrong.
    #[error("{}:{line}: {problem}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        problem: LineProblem,
    },
    /// The report could not be written to the output.
    #[error("cannot write the report: {0}")]
    Write(#[source] std::io::Error),
}

/// The `*.jsonl` files directly in `dir`, in name order.
pub fn jsonl_files(dir: &Path) -> Result<Vec<PathBuf>, CorpusError> {
    let read_err = |source| CorpusError::Read { path: dir.to_path_buf(), source };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        if path.extension().is_some_and(|e| e == "jsonl") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Reads a JSON Lines corpus file.
pub fn read_corpus(path: &Path) -> Result<Vec<LabeledMessage>, CorpusError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| CorpusError::Read { path: path.to_path_buf(), source })?;
    parse_corpus(&text, path)
}

/// Parses corpus text; `path` is only used to name errors and origins.
pub fn parse_corpus(text: &str, path: &Path) -> Result<Vec<LabeledMessage>, CorpusError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let mut message = parse_line(raw).map_err(|problem| CorpusError::Malformed {
            path: path.to_path_buf(),
            line,
            problem,
        })?;
        message.origin = Some(LineOrigin { file: path.to_path_buf(), line });
        out.push(message);
    }
    Ok(out)
}

fn parse_line(raw: &str) -> Result<LabeledMessage, LineProblem> {
    let value: Value = serde_json::from_str(raw).map_err(|e| LineProblem::BadJson(e.to_string()))?;
    let Value::Object(obj) = value else {
        return Err(LineProblem::BadJson("expected a JSON object".to_owned()));
    };
    let text = required_str(&obj, "text")?;
    if text.trim().is_empty() {
        return Err(LineProblem::EmptyText);
    }
    let intent = required_str(&obj, "intent")?;
    let intent = intent.parse::<Intent>().map_err(|_| LineProblem::UnknownIntent(intent.to_owned()))?;
    let lang = optional_str(&obj, "lang")?
        .map(|l| l.parse::<Lang>().map_err(|_| LineProblem::UnknownLang(l.to_owned())))
        .transpose()?;
    Ok(LabeledMessage {
        text: text.to_owned(),
        intent,
        lang,
        from_role: optional_str(&obj, "from_role")?.map(str::to_owned),
        open_ask: optional_str(&obj, "open_ask")?.map(str::to_owned),
        origin: None,
    })
}

fn required_str<'a>(obj: &'a Map<String, Value>, field: &'static str) -> Result<&'a str, LineProblem> {
    optional_str(obj, field)?.ok_or(LineProblem::MissingField(field))
}

fn optional_str<'a>(
    obj: &'a Map<String, Value>,
    field: &'static str,
) -> Result<Option<&'a str>, LineProblem> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(LineProblem::WrongType { field, expected: "a string or null" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(line: &str) -> (usize, LineProblem, String) {
        let text = format!("{{\"text\":\"ok\",\"intent\":\"ack\"}}\n\n{line}\n");
        let err = parse_corpus(&text, Path::new("evals/x.jsonl")).expect_err("the line is malformed");
        let shown = err.to_string();
        match err {
            CorpusError::Malformed { line, problem, .. } => (line, problem, shown),
            other => panic!("expected a malformed-line error, got {other:?}"),
        }
    }

    #[test]
    fn parses_context_and_skips_blank_lines() {
        let text = "{\"text\":\"34\",\"intent\":\"temperature_report\",\"lang\":\"en\",\"from_role\":\"driver\",\"open_ask\":\"reefer_temp\"}\n\n{\"text\":\"ok\",\"intent\":\"ack\",\"open_ask\":null,\"note\":\"x\"}\n";
        let msgs = parse_corpus(text, Path::new("c.jsonl")).expect("valid corpus");
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].intent, Intent::TemperatureReport);
        assert_eq!(msgs[0].open_ask.as_deref(), Some("reefer_temp"));
        assert_eq!(msgs[0].lang, Some(Lang::En));
        assert_eq!(msgs[1].open_ask, None);
        assert_eq!(msgs[1].origin.as_ref().map(|o| o.line), Some(3));
        assert_eq!(msgs[1].origin.as_ref().map(ToString::to_string).as_deref(), Some("c.jsonl:3"));
    }

    #[test]
    fn malformed_lines_name_file_line_and_problem() {
        let (line, p, shown) = problem("{\"text\":\"hi\",\"intent\":\"eta\"}");
        assert_eq!((line, p), (3, LineProblem::UnknownIntent("eta".into())));
        assert!(shown.starts_with("evals/x.jsonl:3: unknown intent"), "{shown}");

        let (_, p, shown) = problem("{\"intent\":\"ack\"}");
        assert_eq!(p, LineProblem::MissingField("text"));
        assert!(shown.contains("missing field `text`"), "{shown}");

        let (_, p, _) = problem("{\"text\":\"ok\"}");
        assert_eq!(p, LineProblem::MissingField("intent"));

        let (_, p, shown) = problem("{\"text\": \"ok\", \"intent\": ");
        assert!(matches!(p, LineProblem::BadJson(_)));
        assert!(shown.contains("bad JSON"), "{shown}");

        let (_, p, _) = problem("[1,2]");
        assert!(matches!(p, LineProblem::BadJson(_)));

        let (_, p, _) = problem("{\"text\":5,\"intent\":\"ack\"}");
        assert_eq!(p, LineProblem::WrongType { field: "text", expected: "a string or null" });

        let (_, p, _) = problem("{\"text\":\"  \",\"intent\":\"ack\"}");
        assert_eq!(p, LineProblem::EmptyText);

        let (_, p, _) = problem("{\"text\":\"ok\",\"intent\":\"ack\",\"lang\":\"fr\"}");
        assert_eq!(p, LineProblem::UnknownLang("fr".into()));
    }

    #[test]
    fn unreadable_file_names_the_path() {
        let err = read_corpus(Path::new("/nonexistent/triage.jsonl")).expect_err("no such file");
        assert!(err.to_string().starts_with("/nonexistent/triage.jsonl: cannot read"), "{err}");
    }
}
