//! Personal data in logs: phone numbers, email addresses and message text are shown redacted
//! unless the process-wide switch says otherwise (`log.debug_pii`, docs/security.md).
//!
//! Every log line that may carry such a value formats it through one of these wrappers:
//!
//! - [`text`] for message text (an SMS, an email body, a drafted reply, a model's output):
//!   only its length is shown, `<42 chars redacted>`;
//! - [`contact`] for where a message goes (a contact id, or a raw phone number or email
//!   address): a phone number or an email address is shown as `<phone redacted>` /
//!   `<email redacted>`, a contact id (`drv`) or a channel as it is;
//! - [`scrub`] for free text that may quote an address (an error, a failure reason): phone
//!   numbers and email addresses inside it are replaced, the rest is kept;
//! - [`reason`] for an error reason whose text after its first `: ` may quote a message (a
//!   provider's response body, a model's output): the head is kept (scrubbed), the rest shown as
//!   its length, `HTTP 503: <180 chars redacted>`.
//!
//! This is formatting only: no IO, no logging framework. The binary turns the switch on with
//! [`set_reveal`] when `log.debug_pii` is true.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

static REVEAL: AtomicBool = AtomicBool::new(false);

/// Shows personal data in logs as it is (`true`) or redacted (`false`, the default).
pub fn set_reveal(on: bool) {
    REVEAL.store(on, Ordering::Relaxed);
}

/// Whether personal data is shown as it is.
pub fn revealed() -> bool {
    REVEAL.load(Ordering::Relaxed)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Contact,
    Scrub,
    Reason,
}

/// A value to log, redacted when displayed unless personal data is revealed.
#[derive(Clone, Copy)]
pub struct Redacted<'a> {
    value: &'a str,
    kind: Kind,
    reveal: Option<bool>,
}

/// Message text: shown as its length.
pub fn text(value: &str) -> Redacted<'_> {
    Redacted { value, kind: Kind::Text, reveal: None }
}

/// A recipient: a phone number or an email address is shown as its kind, a contact id as it is.
pub fn contact(value: &str) -> Redacted<'_> {
    Redacted { value, kind: Kind::Contact, reveal: None }
}

/// Free text that may quote a phone number or an email address: those are replaced.
pub fn scrub(value: &str) -> Redacted<'_> {
    Redacted { value, kind: Kind::Scrub, reveal: None }
}

/// An error reason: kept up to its first `: `, the quoted rest shown as its length.
pub fn reason(value: &str) -> Redacted<'_> {
    Redacted { value, kind: Kind::Reason, reveal: None }
}

impl<'a> Redacted<'a> {
    /// Fixes the switch for this value (tests), instead of the process-wide one.
    pub fn revealed(self, on: bool) -> Self {
        Redacted { reveal: Some(on), ..self }
    }

    fn reveal(&self) -> bool {
        self.reveal.unwrap_or_else(revealed)
    }
}

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reveal() {
            return f.write_str(self.value);
        }
        match self.kind {
            Kind::Text if self.value.is_empty() => Ok(()),
            Kind::Text => write!(f, "<{} chars redacted>", self.value.chars().count()),
            // "-" and "" stand for "no address" in log lines.
            Kind::Contact if self.value.is_empty() || self.value == "-" => f.write_str(self.value),
            Kind::Contact if email_at(self.value.trim(), 0).is_some() => f.write_str("<email redacted>"),
            Kind::Contact if phone_at(self.value.trim(), 0) == Some(self.value.trim().len()) => {
                f.write_str("<phone redacted>")
            }
            Kind::Contact => f.write_str(&scrubbed(self.value)),
            Kind::Scrub => f.write_str(&scrubbed(self.value)),
            Kind::Reason => match self.value.split_once(": ") {
                Some((head, rest)) => {
                    write!(f, "{}: <{} chars redacted>", scrubbed(head), rest.chars().count())
                }
                None => f.write_str(&scrubbed(self.value)),
            },
        }
    }
}

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn is_email_local(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._%+-".contains(c)
}

fn is_email_domain(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '.' || c == '-'
}

/// `text` with every email address replaced by `<email>` and every phone number by `<phone>`.
fn scrubbed(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        // An email address: local part, `@`, a domain with a dot.
        if let Some(end) = email_at(text, i) {
            out.push_str("<email>");
            i = end;
            continue;
        }
        // A phone number, not inside a longer word or number.
        let starts_token = i == 0 || b" \t\r\n([{,;:=\"'<".contains(&bytes[i - 1]);
        if starts_token && let Some(end) = phone_at(text, i) {
            out.push_str("<phone>");
            i = end;
            continue;
        }
        let c = text[i..].chars().next().unwrap_or('\u{fffd}');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// The end of the email address starting at `start`, if one does.
fn email_at(text: &str, start: usize) -> Option<usize> {
    let rest = &text[start..];
    if start > 0 && text[..start].chars().next_back().is_some_and(is_email_local) {
        return None;
    }
    let local = rest.find(|c: char| !is_email_local(c)).unwrap_or(rest.len());
    if local == 0 || !rest[local..].starts_with('@') {
        return None;
    }
    let domain_start = local + 1;
    let domain = &rest[domain_start..];
    let len = domain.find(|c: char| !is_email_domain(c)).unwrap_or(domain.len());
    let domain = domain[..len].trim_end_matches('.');
    let dot = domain.find('.')?;
    if dot == 0 || dot + 1 >= domain.len() {
        return None;
    }
    Some(start + domain_start + domain.len())
}

/// The end of the phone number starting at `start`, if one does: an optional `+`, then digits
/// with single spaces, dots, dashes or parentheses between them; at least 7 digits after a `+`,
/// 10 without; not a date (`2026-03-02 ...`), not followed by a letter or digit.
fn phone_at(text: &str, start: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = start;
    let plus = bytes.get(i) == Some(&b'+');
    if plus {
        i += 1;
    }
    if !bytes.get(i).is_some_and(|b| b.is_ascii_digit() || *b == b'(') {
        return None;
    }
    let (mut digits, mut end) = (0usize, None);
    let mut last_sep = false;
    while let Some(&b) = bytes.get(i) {
        if b.is_ascii_digit() {
            digits += 1;
            end = Some(i + 1);
            last_sep = false;
        } else if matches!(b, b' ' | b'-' | b'.' | b'(' | b')') {
            if last_sep && b != b'(' && b != b')' {
                break;
            }
            last_sep = b != b')';
        } else {
            break;
        }
        i += 1;
    }
    let end = end?;
    let after_ok = bytes.get(end).is_none_or(|b| !b.is_ascii_alphanumeric());
    let enough = if plus { digits >= 7 } else { digits >= 10 };
    let run = &text[start..end];
    if !after_ok || !enough || digits > 15 || looks_like_date(run) {
        return None;
    }
    Some(end)
}

fn looks_like_date(run: &str) -> bool {
    let b = run.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_shows_its_length_only() {
        let t = text("running late, stuck at the scale");
        assert_eq!(t.revealed(false).to_string(), "<32 chars redacted>");
        assert_eq!(t.revealed(true).to_string(), "running late, stuck at the scale");
        assert_eq!(text("").revealed(false).to_string(), "");
    }

    #[test]
    fn contacts_show_their_kind_only() {
        assert_eq!(contact("+13125550111").revealed(false).to_string(), "<phone redacted>");
        assert_eq!(contact("(312) 555-0111").revealed(false).to_string(), "<phone redacted>");
        assert_eq!(contact("dana@carrier.example").revealed(false).to_string(), "<email redacted>");
        assert_eq!(contact("#acme-loads").revealed(false).to_string(), "#acme-loads");
        assert_eq!(contact("drv").revealed(false).to_string(), "drv");
        assert_eq!(contact("-").revealed(false).to_string(), "-");
        assert_eq!(contact("+13125550111").revealed(true).to_string(), "+13125550111");
    }

    #[test]
    fn scrub_replaces_phone_numbers_and_emails_in_free_text() {
        let s = scrub("gateway: +1 312 555 0111 rejected; cc dana@carrier.example, 312.555.0111 too")
            .revealed(false)
            .to_string();
        assert_eq!(s, "gateway: <phone> rejected; cc <email>, <phone> too");
        let kept = "load 481207 at 2026-03-02 12:50:00Z, key 481207/evt:sms_0700/send_sms, HTTP 503, \
                    id 550e8400-e29b-41d4-a716-446655440000 v12";
        assert_eq!(scrub(kept).revealed(false).to_string(), kept);
        let raw = "to +13125550111";
        assert_eq!(scrub(raw).revealed(true).to_string(), raw);
    }

    #[test]
    fn reasons_keep_their_head_only() {
        let r = "HTTP 503: {\"error\":\"overloaded: Hi Luis, call +13125550111\"}";
        assert_eq!(reason(r).revealed(false).to_string(), "HTTP 503: <50 chars redacted>");
        assert_eq!(reason(r).revealed(true).to_string(), r);
        assert_eq!(reason("timed out after 300 ms").revealed(false).to_string(), "timed out after 300 ms");
    }

    #[test]
    fn the_process_switch_is_off_by_default() {
        assert!(!revealed());
        assert_eq!(contact("+13125550111").to_string(), "<phone redacted>");
    }
}
