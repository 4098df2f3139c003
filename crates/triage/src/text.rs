//! Text normalization and the lexer shared by the features and the extractors.
//!
//! Messages are short, informal and bilingual, so normalization is aggressive:
//! lowercase, Spanish accents folded (`llegué` -> `llegue`, `mañana` -> `manana`),
//! apostrophes removed (`i'm` -> `im`, the way drivers type it anyway), emoji
//! modifiers dropped (`👍🏽` -> `👍`), whitespace collapsed.

/// Longest prefix of a message (in bytes, on a char boundary) that triage
/// looks at. Contact messages are short; this bounds the work on a pasted
/// email thread so `classify` stays in microseconds whatever the input.
pub(crate) const MAX_TEXT_BYTES: usize = 2000;

/// Lowercases, folds accents and punctuation variants, collapses whitespace.
pub(crate) fn normalize(text: &str) -> String {
    let text = truncate_on_char_boundary(text, MAX_TEXT_BYTES);
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for c in text.chars().map(fold_punctuation) {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        // Emoji modifiers and joiners carry no meaning for triage.
        if matches!(c, '\u{FE0E}' | '\u{FE0F}' | '\u{200D}' | '\u{1F3FB}'..='\u{1F3FF}') {
            continue;
        }
        // Apostrophes vanish: "i'm" and "im" are the same word here.
        if matches!(c, '\'' | '\u{2019}' | '\u{2018}' | '`' | '\u{B4}') {
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        for lower in c.to_lowercase() {
            out.push(fold(lower));
        }
    }
    fold_meridiem_dots(&out)
}

/// `text` cut to at most `max` bytes without splitting a character.
pub(crate) fn truncate_on_char_boundary(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

fn fold(c: char) -> char {
    match c {
        'á' | 'à' | 'â' | 'ä' | 'ã' => 'a',
        'é' | 'è' | 'ê' | 'ë' => 'e',
        'í' | 'ì' | 'î' | 'ï' => 'i',
        'ó' | 'ò' | 'ô' | 'ö' | 'õ' => 'o',
        'ú' | 'ù' | 'û' | 'ü' => 'u',
        'ñ' => 'n',
        'ç' => 'c',
        'º' | '˚' => '°',
        other => other,
    }
}

/// Punctuation variants, before lowercasing: inverted marks separate words
/// like a space, typographic quotes and dashes become ASCII.
fn fold_punctuation(c: char) -> char {
    match c {
        '¿' | '¡' => ' ',
        '\u{201C}' | '\u{201D}' => '"',
        '\u{2212}' | '\u{2013}' | '\u{2014}' => '-',
        other => other,
    }
}

/// "a.m." / "p.m." become "am" / "pm" so the lexer sees one word.
fn fold_meridiem_dots(s: &str) -> String {
    if !s.contains(".m") {
        return s.to_owned();
    }
    s.replace("a.m.", "am").replace("p.m.", "pm").replace("a.m", "am").replace("p.m", "pm")
}

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokKind {
    /// A run of letters.
    Word,
    /// A number, optionally signed, optionally with one decimal point: `45`, `-10`, `34.5`.
    Num,
    /// Digits, a colon, digits: `2:30`, `14:15`.
    Clock,
    /// Any other single character that is kept: `?`, `!`, `#`, `@`, `-`, `/`, `°`, emoji.
    Sym,
}

/// One token of a normalized message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Tok<'a> {
    pub text: &'a str,
    pub kind: TokKind,
    /// No whitespace between this token and the previous one (`230pm`, `po#`).
    pub joined: bool,
}

impl Tok<'_> {
    pub(crate) fn is_word(&self, w: &str) -> bool {
        self.kind == TokKind::Word && self.text == w
    }

    pub(crate) fn is_any_word(&self, words: &[&str]) -> bool {
        self.kind == TokKind::Word && words.contains(&self.text)
    }

    pub(crate) fn is_sym(&self, c: char) -> bool {
        self.kind == TokKind::Sym && self.text.starts_with(c)
    }

    /// The value of a `Num` token; `None` for other kinds or out-of-range text.
    pub(crate) fn number(&self) -> Option<f64> {
        if self.kind != TokKind::Num {
            return None;
        }
        let v: f64 = self.text.parse().ok()?;
        v.is_finite().then_some(v)
    }

    /// The value of an unsigned integer `Num` token that fits in a `u32`.
    pub(crate) fn integer(&self) -> Option<u32> {
        if self.kind != TokKind::Num || !self.text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        self.text.parse().ok()
    }

    /// `(hour, minute)` of a `Clock` token with a valid 24-hour time.
    pub(crate) fn clock(&self) -> Option<(u8, u8)> {
        if self.kind != TokKind::Clock {
            return None;
        }
        let (h, m) = self.text.split_once(':')?;
        if h.is_empty() || h.len() > 2 || m.len() != 2 {
            return None;
        }
        let h: u8 = h.parse().ok()?;
        let m: u8 = m.parse().ok()?;
        (h < 24 && m < 60).then_some((h, m))
    }
}

/// Punctuation that carries no signal and is dropped by the lexer.
fn is_dropped_punct(c: char) -> bool {
    matches!(c, '.' | ',' | ';' | '"' | '(' | ')' | '[' | ']' | '{' | '}' | '*' | '_' | '~' | '|' | '<' | '>')
}

/// Splits a normalized message into tokens.
pub(crate) fn lex(s: &str) -> Vec<Tok<'_>> {
    let mut toks = Vec::with_capacity(s.len() / 3 + 1);
    let bytes = s.as_bytes();
    let mut chars = s.char_indices().peekable();
    let mut joined = false;
    let mut prev: Option<char> = None;
    while let Some((start, c)) = chars.next() {
        if c == ' ' {
            joined = false;
            prev = Some(c);
            continue;
        }
        let next_is_digit = bytes.get(start + 1).is_some_and(u8::is_ascii_digit);
        let sign_allowed = !prev.is_some_and(|p| p.is_alphanumeric());
        if c.is_ascii_digit() || ((c == '-' || c == '+') && next_is_digit && sign_allowed) {
            let mut end = start + c.len_utf8();
            let mut separator: Option<u8> = None;
            loop {
                match bytes.get(end) {
                    Some(b) if b.is_ascii_digit() => end += 1,
                    Some(&sep @ (b'.' | b':'))
                        if separator.is_none() && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) =>
                    {
                        separator = Some(sep);
                        end += 1;
                    }
                    _ => break,
                }
            }
            while chars.peek().is_some_and(|&(i, _)| i < end) {
                chars.next();
            }
            let kind = if separator == Some(b':') { TokKind::Clock } else { TokKind::Num };
            toks.push(Tok { text: &s[start..end], kind, joined });
            prev = Some('0');
        } else if c.is_alphabetic() {
            let mut end = start + c.len_utf8();
            while let Some(&(i, n)) = chars.peek() {
                if n.is_alphabetic() {
                    end = i + n.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            toks.push(Tok { text: &s[start..end], kind: TokKind::Word, joined });
            prev = Some('a');
        } else if is_dropped_punct(c) || c.is_control() {
            prev = Some(c);
            // Dropped punctuation still separates: "ok.eta" is two tokens, not joined.
            joined = false;
            continue;
        } else {
            toks.push(Tok { text: &s[start..start + c.len_utf8()], kind: TokKind::Sym, joined });
            prev = Some(c);
        }
        joined = true;
    }
    toks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<(String, TokKind, bool)> {
        lex(s).into_iter().map(|t| (t.text.to_owned(), t.kind, t.joined)).collect()
    }

    #[test]
    fn normalize_folds_case_accents_and_apostrophes() {
        assert_eq!(normalize("  Ya LLEGUÉ  a la   entrega "), "ya llegue a la entrega");
        assert_eq!(normalize("I’m here 👍🏽"), "im here 👍");
        assert_eq!(normalize("ETA 2 P.M."), "eta 2 pm");
        assert_eq!(normalize("¿cuál es el PO?"), "cual es el po?");
    }

    #[test]
    fn lexer_splits_numbers_units_and_symbols() {
        use TokKind::*;
        assert_eq!(
            kinds("eta 230pm"),
            vec![("eta".into(), Word, false), ("230".into(), Num, false), ("pm".into(), Word, true)]
        );
        assert_eq!(
            kinds("10-4"),
            vec![("10".into(), Num, false), ("-".into(), Sym, true), ("4".into(), Num, true)]
        );
        assert_eq!(
            kinds("temp -10.5 at 2:30?"),
            vec![
                ("temp".into(), Word, false),
                ("-10.5".into(), Num, false),
                ("at".into(), Word, false),
                ("2:30".into(), Clock, false),
                ("?".into(), Sym, true)
            ]
        );
        assert_eq!(kinds("po#").len(), 2);
        assert!(lex("").is_empty());
    }

    #[test]
    fn clock_and_number_accessors_reject_garbage() {
        let toks = lex("99999999999:99 2:75 14:15 1e999");
        assert_eq!(toks[0].clock(), None);
        assert_eq!(toks[1].clock(), None);
        assert_eq!(toks[2].clock(), Some((14, 15)));
        assert_eq!(lex("99999999999999999999")[0].integer(), None);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let s = "é".repeat(MAX_TEXT_BYTES);
        let t = truncate_on_char_boundary(&s, MAX_TEXT_BYTES + 1);
        assert!(t.len() <= MAX_TEXT_BYTES + 1);
        assert!(s.is_char_boundary(t.len()));
    }
}
