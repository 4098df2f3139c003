//! SQL only with bound parameters: a lexical check of `crates/store/src/**/*.rs`.
//!
//! Every statement the store runs must be SQL text fixed at compile time, with every value bound
//! (`$1`, `?1`, `?`). The check reads the source (comments skipped, string literals kept whole)
//! and refuses:
//!
//! 1. a statement given to sqlx (`sqlx::query*(..)`, `raw_sql(..)`, `Executor::execute(..)` and
//!    the `fetch*` methods called with SQL) that is not a string literal, a `const NAME: &str`
//!    holding one literal, a `let` binding of an allowed `format!`, or an allow-listed builder;
//! 2. a `format!` whose text holds SQL and interpolates anything but such a constant
//!    (`{HELD}`), unless allow-listed below with the reason it is safe;
//! 3. SQL text joined with `+`, and `push_str` / `.sql(..)` pieces of a query builder that are
//!    not literals (allow-listed: the ordinals of `VALUES` rows, numbers from `enumerate`).
//!
//! The second test runs the same check on injected snippets, so the check itself can fail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Places where something other than a literal goes into SQL text, each with why it is safe.
/// An entry that matches nothing is an error too: the list never outlives the code.
const ALLOWED: &[Allowed] = &[
    Allowed {
        file: "postgres/mod.rs",
        what: "format!(\"CREATE SCHEMA IF NOT EXISTS \\\"{schema}\\\"\")",
        why: "an identifier cannot be a bound parameter; `schema` has passed check_schema_name \
              ([a-z_][a-z0-9_]*, at most 63 bytes) in connect_in_schema_with, and is quoted",
    },
    Allowed {
        file: "postgres/mod.rs",
        what: "format!(\"DROP SCHEMA IF EXISTS \\\"{schema}\\\" CASCADE\")",
        why: "the schema of a store opened by connect_in_schema_with (checked there), quoted",
    },
    Allowed {
        file: "postgres/log.rs",
        what: "sqlx::query(&sql)",
        why: "`in_log(APPEND | APPEND_LOADS, table)`: a `const &str` holding one literal with \
              `{log}` replaced by a table name that is either the literal `LOG_PARENT` or \
              `log_partition(month)`, formatted from a `NaiveDate`'s year and month (digits only); \
              every value is bound",
    },
    Allowed {
        file: "postgres/log.rs",
        what: "format!(\"PREPARE {name} AS {}\",in_log(sql,&part))",
        why: "a unit test's (the version's plan): `name` is one of two literal statement names, \
              `sql` the `APPEND`/`APPEND_LOADS` constant and `part` `log_partition` of a fixed date",
    },
    Allowed {
        file: "postgres/log.rs",
        what: "format!(\"EXPLAIN EXECUTE {name}({nulls})\")",
        why: "the same unit test: `name` as above, `nulls` the literal `NULL` repeated per parameter",
    },
    Allowed {
        file: "postgres/outbox.rs",
        what: "sqlx::query(&sql)",
        why: "`in_outbox(MARK_* | STILL_HELD, table)`: a `const &str` holding one literal with \
              `{outbox}` replaced by a table name that is either the literal `OUTBOX_PARENT` or \
              `outbox_partition(at)`, formatted from a UTC date (digits only); every value is bound",
    },
    Allowed {
        file: "postgres/outbox.rs",
        what: "sqlx::query_scalar(&sql)",
        why: "`in_outbox(MARK_DISPATCHED_BATCH | MARK_FAILED_BATCH | MARK_DEFERRED_BATCH, table)`, as \
              `sqlx::query(&sql)` above",
    },
    Allowed {
        file: "sqlite/log.rs",
        what: "sqlx::query(&self.sql)",
        why: "the `Generated` builder: its text is made only of `.sql(..)` pieces (literals or \
              ordinals, checked below) and `?` placeholders pushed by `.arg(..)`, whose values are \
              bound in order",
    },
    Allowed {
        file: "sqlite/log.rs",
        what: "self.sql.push_str(s)",
        why: "`Generated::sql`, the one place pieces join the builder; every call is checked",
    },
    Allowed {
        file: "sqlite/log.rs",
        what: ".sql(&i.to_string())",
        why: "`i` is a row ordinal from `enumerate()` (a usize), never input",
    },
    Allowed {
        file: "sqlite/log.rs",
        what: ".sql(&(i + 1).to_string())",
        why: "`i` is a row ordinal from `enumerate()` (a usize), never input",
    },
    Allowed {
        file: "sqlite/log.rs",
        what: ".sql(SUMMARY_UPSERT)",
        why: "`SUMMARY_UPSERT` is a `const &str` holding one literal (the `load_summary` upsert's \
              ON CONFLICT clause, shared with `put_summary_in`)",
    },
];

struct Allowed {
    /// The file, relative to `crates/store/src`.
    file: &'static str,
    /// The code, as the check prints it (tokens without spaces but inside literals).
    what: &'static str,
    why: &'static str,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A string literal's text (escapes kept as written).
    Str(String),
    Ident(String),
    Punct(char),
    /// A number, a char literal or a lifetime: never SQL.
    Other(String),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

fn lex(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1usize);
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        let start_line = line;
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && at(i + 1) == 'r')) && {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            while at(j) == '#' {
                j += 1;
            }
            at(j) == '"' && (c == 'b' || at(i + 1) == '#' || at(i + 1) == '"')
        } {
            // A raw string: r"..", r#".."#, br"..".
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            let mut text = String::new();
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                    j += 1 + hashes;
                    break;
                }
                if chars[j] == '\n' {
                    line += 1;
                }
                text.push(chars[j]);
                j += 1;
            }
            out.push(Token { tok: Tok::Str(text), line: start_line });
            i = j;
        } else if c == '"' || (c == 'b' && at(i + 1) == '"') {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut text = String::new();
            while j < chars.len() && chars[j] != '"' {
                if chars[j] == '\\' {
                    text.push(chars[j]);
                    j += 1;
                }
                if j < chars.len() {
                    if chars[j] == '\n' {
                        line += 1;
                    }
                    text.push(chars[j]);
                    j += 1;
                }
            }
            out.push(Token { tok: Tok::Str(text), line: start_line });
            i = j + 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\'') or a lifetime ('a).
            let from = i;
            if at(i + 1) == '\\' {
                let mut j = i + 3;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
            }
            out.push(Token {
                tok: Tok::Other(chars[from..i.min(chars.len())].iter().collect()),
                line: start_line,
            });
        } else if c.is_alphabetic() || c == '_' {
            let mut j = i;
            while at(j).is_alphanumeric() || at(j) == '_' {
                j += 1;
            }
            out.push(Token { tok: Tok::Ident(chars[i..j].iter().collect()), line: start_line });
            i = j;
        } else if c.is_ascii_digit() {
            let from = i;
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
            out.push(Token { tok: Tok::Other(chars[from..i].iter().collect()), line: start_line });
        } else {
            out.push(Token { tok: Tok::Punct(c), line: start_line });
            i += 1;
        }
    }
    out
}

fn is_punct(t: Option<&Token>, c: char) -> bool {
    matches!(t, Some(Token { tok: Tok::Punct(p), .. }) if *p == c)
}

fn is_ident(t: Option<&Token>, name: &str) -> bool {
    matches!(t, Some(Token { tok: Tok::Ident(s), .. }) if s == name)
}

/// The tokens of the first argument of the call whose `(` is at `open`, and the index after it.
fn first_arg(toks: &[Token], open: usize) -> (&[Token], usize) {
    let mut depth = 0i32;
    let mut j = open + 1;
    while j < toks.len() {
        match &toks[j].tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') if depth == 0 => break,
            Tok::Punct(')' | ']' | '}') => depth -= 1,
            Tok::Punct(',') if depth == 0 => break,
            _ => {}
        }
        j += 1;
    }
    (&toks[open + 1..j], j)
}

/// The index of the `)` closing the `(` at `open`.
fn closing(toks: &[Token], open: usize) -> usize {
    let mut depth = 0i32;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t.tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// Tokens as the allow-list spells them: no spaces, literals quoted.
fn render(toks: &[Token]) -> String {
    let mut s = String::new();
    for t in toks {
        match &t.tok {
            Tok::Str(text) => {
                s.push('"');
                s.push_str(text);
                s.push('"');
            }
            Tok::Ident(i) => {
                if s.ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                    s.push(' ');
                }
                s.push_str(i);
            }
            Tok::Punct(c) => {
                if *c == '+' {
                    s.push_str(" + ");
                } else {
                    s.push(*c);
                }
            }
            Tok::Other(text) => s.push_str(text),
        }
    }
    s
}

const SQL_WORDS: &[&str] =
    &["SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "WHERE", "VALUES", "SET", "FROM"];

fn looks_like_sql(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphabetic()).any(|w| SQL_WORDS.contains(&w))
}

/// `const NAME: &str = "literal";` across the crate: name → whether every definition is one literal.
fn literal_consts(files: &[(String, Vec<Token>)]) -> BTreeMap<String, bool> {
    let mut consts: BTreeMap<String, bool> = BTreeMap::new();
    for (_, toks) in files {
        for (i, t) in toks.iter().enumerate() {
            if t.tok != Tok::Ident("const".into()) {
                continue;
            }
            let Some(Token { tok: Tok::Ident(name), .. }) = toks.get(i + 1) else { continue };
            let is_str = is_punct(toks.get(i + 2), ':')
                && is_punct(toks.get(i + 3), '&')
                && is_ident(toks.get(i + 4), "str")
                && is_punct(toks.get(i + 5), '=');
            if !is_str {
                continue;
            }
            let literal = matches!(toks.get(i + 6), Some(Token { tok: Tok::Str(_), .. }))
                && is_punct(toks.get(i + 7), ';');
            let entry = consts.entry(name.clone()).or_insert(true);
            *entry &= literal;
        }
    }
    consts
}

#[derive(Debug)]
struct Finding {
    file: String,
    line: usize,
    code: String,
    problem: String,
}

struct Checker<'a> {
    consts: BTreeMap<String, bool>,
    findings: Vec<Finding>,
    used_allowances: Vec<(&'a str, &'a str)>,
    allowed: &'a [Allowed],
    /// Statements given to sqlx that were checked.
    statements: usize,
}

impl<'a> Checker<'a> {
    fn allowed(&mut self, file: &str, code: &str) -> bool {
        for a in self.allowed {
            if file.ends_with(a.file) && code == a.what {
                self.used_allowances.push((a.file, a.what));
                return true;
            }
        }
        false
    }

    fn refuse(&mut self, file: &str, toks: &[Token], problem: impl Into<String>) {
        let code = render(toks);
        if self.allowed(file, &code) {
            return;
        }
        self.findings.push(Finding {
            file: file.to_owned(),
            line: toks.first().map_or(0, |t| t.line),
            code,
            problem: problem.into(),
        });
    }

    fn is_literal_const(&self, name: &str) -> bool {
        self.consts.get(name).copied().unwrap_or(false)
    }

    /// `format!(literal)` at `bang - 1`: placeholders may only name literal constants, and no
    /// argument may follow the literal.
    fn check_format(&mut self, file: &str, toks: &[Token], name_at: usize) {
        let open = name_at + 2;
        let end = closing(toks, open);
        let call = &toks[name_at..=end.min(toks.len() - 1)];
        let Some(Token { tok: Tok::Str(text), .. }) = toks.get(open + 1) else {
            self.refuse(file, call, "format! without a literal format string builds SQL");
            return;
        };
        if !is_punct(toks.get(open + 2), ')') {
            self.refuse(file, call, "format! arguments are spliced into SQL text: bind them");
            return;
        }
        let mut rest = text.replace("{{", "").replace("}}", "");
        while let Some(start) = rest.find('{') {
            let Some(len) = rest[start..].find('}') else { break };
            let inner = rest[start + 1..start + len].to_string();
            let name = inner.split(':').next().unwrap_or_default().trim().to_string();
            if !self.is_literal_const(&name) {
                self.refuse(
                    file,
                    call,
                    format!("{{{name}}} is spliced into SQL text: only `const NAME: &str = \"...\"` may be"),
                );
                return;
            }
            rest = rest[start + len + 1..].to_string();
        }
    }

    /// The SQL argument of a call: a literal, a literal constant, an allowed `format!`, or a
    /// variable bound to one.
    fn check_sql_arg(&mut self, file: &str, toks: &[Token], call: &[Token], arg: &[Token], arg_at: usize) {
        let mut a: Vec<&Token> = arg.iter().collect();
        // `&x`, `x.as_str()`, `&*x`: the same text.
        while is_punct(a.first().copied(), '&') || is_punct(a.first().copied(), '*') {
            a.remove(0);
        }
        if a.len() >= 4
            && is_ident(a.get(a.len() - 3).copied(), "as_str")
            && is_punct(a.get(a.len() - 4).copied(), '.')
        {
            a.truncate(a.len() - 4);
        }
        match a.as_slice() {
            [Token { tok: Tok::Str(_), .. }] => {}
            [Token { tok: Tok::Ident(name), .. }] if self.is_literal_const(name) => {}
            [Token { tok: Tok::Ident(f), .. }, Token { tok: Tok::Punct('!'), .. }, ..] if f == "format" => {
                let at = arg_at + arg.iter().position(|t| t.tok == Tok::Ident("format".into())).unwrap_or(0);
                self.check_format(file, toks, at);
            }
            [Token { tok: Tok::Ident(var), .. }] => self.check_binding(file, toks, call, var, arg_at),
            _ => {
                self.refuse(file, call, "SQL that is not a literal, a literal constant or a checked format!")
            }
        }
    }

    /// `let var = <allowed>;`, the nearest before `at`, never `let mut`.
    fn check_binding(&mut self, file: &str, toks: &[Token], call: &[Token], var: &str, at: usize) {
        let found = (0..at).rev().find(|&j| {
            is_ident(toks.get(j), "let")
                && (is_ident(toks.get(j + 1), var)
                    || (is_ident(toks.get(j + 1), "mut") && is_ident(toks.get(j + 2), var)))
        });
        let Some(j) = found else {
            self.refuse(file, call, format!("`{var}` is not bound to SQL text this check can read"));
            return;
        };
        if is_ident(toks.get(j + 1), "mut") {
            self.refuse(file, call, format!("`{var}` is a mutable string: SQL built at run time"));
            return;
        }
        let eq = j + 2;
        if !is_punct(toks.get(eq), '=') {
            self.refuse(file, call, format!("`{var}` has a type or pattern this check cannot read"));
            return;
        }
        let end = (eq..toks.len()).find(|&k| is_punct(toks.get(k), ';')).unwrap_or(toks.len());
        let init = &toks[eq + 1..end];
        self.check_sql_arg(file, toks, call, init, eq + 1);
    }

    fn check_file(&mut self, file: &str, toks: &[Token]) {
        for i in 0..toks.len() {
            let prev = i.checked_sub(1).and_then(|p| toks.get(p));
            let Tok::Ident(name) = &toks[i].tok else {
                if is_punct(toks.get(i), '+') && joins_sql(toks, i) {
                    let from = i.saturating_sub(5);
                    let to = (i + 3).min(toks.len());
                    self.refuse(file, &toks[from..to], "SQL text joined with `+`");
                }
                continue;
            };
            let method = is_punct(prev, '.');
            let definition = is_ident(prev, "fn");
            match name.as_str() {
                // sqlx's entry points: sqlx::query(..), query_as::<..>(..), raw_sql(..).
                "query" | "query_as" | "query_scalar" | "query_with" | "query_as_with"
                | "query_scalar_with" | "raw_sql"
                    if !method && !definition =>
                {
                    let mut open = i + 1;
                    if is_punct(toks.get(open), ':')
                        && is_punct(toks.get(open + 1), ':')
                        && is_punct(toks.get(open + 2), '<')
                    {
                        let mut depth = 0;
                        let mut j = open + 2;
                        while j < toks.len() {
                            match toks[j].tok {
                                Tok::Punct('<') => depth += 1,
                                Tok::Punct('>') => {
                                    depth -= 1;
                                    if depth == 0 {
                                        break;
                                    }
                                }
                                _ => {}
                            }
                            j += 1;
                        }
                        open = j + 1;
                    }
                    if !is_punct(toks.get(open), '(') {
                        continue; // a path (`sqlx::query::Query`), not a call
                    }
                    let (arg, _) = first_arg(toks, open);
                    let end = closing(toks, open);
                    let start = if i >= 3 && is_ident(toks.get(i - 3), "sqlx") { i - 3 } else { i };
                    let call = toks[start..=end.min(toks.len() - 1)].to_vec();
                    self.statements += 1;
                    self.check_sql_arg(file, toks, &call, arg, open + 1);
                }
                // Executor methods called with SQL text (`conn.execute("COMMIT")`); called with
                // an executor (`query.execute(&self.pool)`) they are not SQL.
                "execute" | "execute_many" | "fetch" | "fetch_all" | "fetch_one" | "fetch_optional"
                | "fetch_many" | "prepare" | "describe"
                    if method && is_punct(toks.get(i + 1), '(') =>
                {
                    let open = i + 1;
                    let (arg, _) = first_arg(toks, open);
                    if is_executor(arg) {
                        continue;
                    }
                    let end = closing(toks, open);
                    let call = toks[i - 1..=end.min(toks.len() - 1)].to_vec();
                    self.statements += 1;
                    self.check_sql_arg(file, toks, &call, arg, open + 1);
                }
                // SQL built with `format!` anywhere, even before it reaches a call.
                "format" if is_punct(toks.get(i + 1), '!') && is_punct(toks.get(i + 2), '(') => {
                    if let Some(Token { tok: Tok::Str(text), .. }) = toks.get(i + 3)
                        && looks_like_sql(text)
                    {
                        self.check_format(file, toks, i);
                    }
                }
                // String building: only the allow-listed builder may.
                "push_str" if method => {
                    let end = closing(toks, i + 1);
                    let from = (0..i)
                        .rev()
                        .take_while(|&j| !is_punct(toks.get(j), ';') && !is_punct(toks.get(j), '{'))
                        .last()
                        .unwrap_or(i);
                    self.refuse(
                        file,
                        &toks[from..=end.min(toks.len() - 1)],
                        "push_str builds text at run time",
                    );
                }
                // The pieces of the `Generated` builder.
                "sql" if method && is_punct(toks.get(i + 1), '(') => {
                    let open = i + 1;
                    let (arg, _) = first_arg(toks, open);
                    let end = closing(toks, open);
                    let call = toks[i - 1..=end.min(toks.len() - 1)].to_vec();
                    if !literal_piece(arg) {
                        self.refuse(file, &call, "a builder piece that is not a literal");
                    }
                }
                _ => {}
            }
        }
    }
}

/// Whether the `+` at `k` joins SQL text: `"SQL" + x`, `"SQL".to_string() + x`, `x + "SQL"`,
/// `x + &"SQL"`, `s += "SQL"`.
fn joins_sql(toks: &[Token], k: usize) -> bool {
    let sql_at = |j: Option<usize>| matches!(j.and_then(|j| toks.get(j)), Some(Token { tok: Tok::Str(text), .. }) if looks_like_sql(text));
    let left = sql_at(k.checked_sub(1))
        || (k >= 5
            && is_punct(toks.get(k - 4), '.')
            && is_punct(toks.get(k - 2), '(')
            && is_punct(toks.get(k - 1), ')')
            && sql_at(Some(k - 5)));
    let mut r = k + 1;
    while is_punct(toks.get(r), '=') || is_punct(toks.get(r), '&') {
        r += 1;
    }
    left || sql_at(Some(r))
}

/// An argument that is an executor, not SQL: `&self.pool`, `&mut *conn`, `executor`, `c`, ...
fn is_executor(arg: &[Token]) -> bool {
    let text = render(arg);
    // `&mut conn` renders with a space after `mut`: trimmed too, or an owned connection would
    // pass for SQL.
    let text = text.trim_start_matches('&').trim_start_matches("mut").trim_start().trim_start_matches('*');
    matches!(
        text,
        "executor" | "conn" | "c" | "tx" | "pool" | "self.pool" | "self.relay_pool" | "self.readers"
    ) || text.ends_with(".pool()")
}

/// A builder piece: one literal, or an `if` whose branches are each one literal.
fn literal_piece(arg: &[Token]) -> bool {
    match arg {
        [Token { tok: Tok::Str(_), .. }] => true,
        [first, ..] if first.tok == Tok::Ident("if".into()) => {
            let mut i = 0;
            let mut branches = 0;
            while i < arg.len() {
                if is_punct(arg.get(i), '{') {
                    let ok = matches!(arg.get(i + 1), Some(Token { tok: Tok::Str(_), .. }))
                        && is_punct(arg.get(i + 2), '}');
                    if !ok {
                        return false;
                    }
                    branches += 1;
                    i += 3;
                } else {
                    i += 1;
                }
            }
            branches == 2
        }
        _ => false,
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("read the source directory").flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let path = e.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// Runs the check over `(file, source)` pairs; returns the findings and the allow-list entries
/// that matched nothing.
fn check(sources: &[(String, String)], allowed: &[Allowed]) -> (Vec<Finding>, Vec<String>, usize) {
    let files: Vec<(String, Vec<Token>)> = sources.iter().map(|(f, s)| (f.clone(), lex(s))).collect();
    let mut checker = Checker {
        consts: literal_consts(&files),
        findings: Vec::new(),
        used_allowances: Vec::new(),
        allowed,
        statements: 0,
    };
    for (file, toks) in &files {
        checker.check_file(file, toks);
    }
    let unused = allowed
        .iter()
        .filter(|a| !checker.used_allowances.contains(&(a.file, a.what)))
        .map(|a| format!("{}: {}", a.file, a.what))
        .collect();
    (checker.findings, unused, checker.statements)
}

fn report(findings: &[Finding]) -> String {
    findings.iter().map(|f| format!("  {}:{}: {}\n      {}\n", f.file, f.line, f.problem, f.code)).collect()
}

#[test]
fn the_store_runs_only_fixed_sql_with_bound_values() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    assert!(paths.len() >= 10, "found only {} source files under {}", paths.len(), src.display());
    let sources: Vec<(String, String)> = paths
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(&src).unwrap_or(p).to_string_lossy().replace('\\', "/");
            (rel, std::fs::read_to_string(p).expect("read a source file"))
        })
        .collect();
    let (findings, unused, statements) = check(&sources, ALLOWED);
    // The store runs about forty statements: far fewer means the check stopped seeing them.
    assert!(statements >= 35, "only {statements} statements found: the lexer lost track");
    assert!(
        findings.is_empty(),
        "SQL must be fixed text with bound values (crates/store/tests/sql_bound.rs explains the rule; \
         bind the value, or allow-list the place with the reason it is safe):\n{}",
        report(&findings)
    );
    assert!(unused.is_empty(), "allow-list entries that match nothing any more (remove them): {unused:?}");
    for a in ALLOWED {
        assert!(!a.why.is_empty(), "{}: an allowance needs its reason", a.what);
    }
}

#[test]
fn the_check_refuses_spliced_sql() {
    let bad = [
        (
            "interpolated value",
            r#"fn f(id: &str) { sqlx::query(&format!("SELECT * FROM t WHERE id = '{id}'")); }"#,
        ),
        (
            "positional argument",
            r#"fn f(id: &str) { sqlx::query(&format!("DELETE FROM t WHERE id = {}", id)); }"#,
        ),
        (
            "a binding built with format!",
            r#"fn f(t: &str) { let sql = format!("SELECT 1 FROM {t}"); sqlx::query_scalar::<_, i64>(&sql); }"#,
        ),
        ("a mutable string", r#"fn f(t: &str) { let mut sql = String::new(); sqlx::query(&sql); }"#),
        ("concatenation", r#"fn f(t: &str) { let q = "SELECT * FROM t WHERE id = ".to_string() + t; }"#),
        ("an unknown variable", r#"fn f(q: &str) { sqlx::query(q); }"#),
        ("a non-literal constant", r#"const Q: &str = X; fn f() { sqlx::query(Q); }"#),
        ("execute with format!", r#"fn f(c: C, t: &str) { c.execute(format!("DROP TABLE {t}").as_str()); }"#),
        ("raw_sql", r#"fn f(s: String) { sqlx::raw_sql(&s); }"#),
        ("push_str", r#"fn f(s: &mut String, t: &str) { s.push_str(t); }"#),
        ("a builder piece", r#"fn f(g: G, t: &str) { g.sql(t); }"#),
    ];
    for (what, src) in bad {
        let (findings, _, _) = check(&[("bad.rs".into(), src.into())], &[]);
        assert!(!findings.is_empty(), "{what} was not refused: {src}");
    }
    let good = r#"
        const HELD: &str = "id = $1 AND claim_token = $2";
        const VERSION: &str = "SELECT max(seq) FROM log_entries WHERE load_id = $1";
        // sqlx::query(&format!("SELECT {x}")) in a comment is not code.
        fn f(conn: C) {
            sqlx::query("SELECT 1 WHERE a = $1").bind(1).execute(&self.pool);
            sqlx::query_scalar::<_, i64>(VERSION).fetch_one(&mut *conn);
            sqlx::query_scalar::<_, i64>(VERSION).fetch_one(&mut conn);
            let sql = format!("UPDATE outbox SET status = 'x' WHERE {HELD}");
            sqlx::query(&sql).bind(1).execute(executor);
            conn.execute("COMMIT");
            let msg = format!("row {id} failed");
        }
    "#;
    let (findings, _, _) = check(&[("good.rs".into(), good.into())], &[]);
    assert!(findings.is_empty(), "safe code refused:\n{}", report(&findings));
}
