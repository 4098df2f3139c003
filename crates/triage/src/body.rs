//! The part of a message its sender wrote now.
//!
//! Dispatchers answer by email, and an email carries much more than its new text: the earlier
//! messages of the thread quoted below it (often the agent's own question, "what is your ETA to
//! stop 2?"), a sign-off and a signature with phone and MC numbers, a legal disclaimer, "Sent
//! from my iPhone". Read whole, those parts put words in the sender's mouth: the quoted question
//! looks like a question, the signature's numbers look like times. [`split`] keeps the new text
//! and says what it dropped, so the features can still tell an email from a text.
//!
//! Rules, on lines, case-insensitive, first match wins:
//! - **Reply quote**: a line starting with `>`; "On … wrote:" (the "wrote:" on the same or the
//!   next line), "El … escribió:"; an "Original Message" / "Mensaje original" rule; an Outlook
//!   header block (`From:`/`De:` followed within three lines by `Sent:`/`Date:`/`To:`/
//!   `Subject:` or their Spanish twins); a line of ten or more `_`. Everything from there on is
//!   dropped.
//! - **Forward**: "Forwarded message", "Begin forwarded message", "Mensaje reenviado". The
//!   forwarded text is what the sender is passing on ("FYI, see the driver's text below"), so
//!   it is kept, without its header lines and `>` marks, after the new text.
//! - **Signature**: from a line that is only a sign-off ("Thanks,", "Best regards", "Saludos
//!   cordiales", "Quedo atento"), a `--` line, a "Sent from my …" line or the first line of a
//!   disclaimer, when it is not the first line with text: everything below it is dropped.
//!
//! Messages without any of these (every SMS) come back unchanged and borrowed. Only the first
//! [`MAX_SCAN_BYTES`] are read, so a megabyte of quoted thread costs what 16 KiB does.

use std::borrow::Cow;

use crate::text::truncate_on_char_boundary;

/// Longest prefix of a message that is searched for quotes and signatures.
pub(crate) const MAX_SCAN_BYTES: usize = 16 * 1024;

/// What [`split`] found besides the new text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Several lines of text: the message is laid out like an email.
    pub multiline: bool,
    /// A quoted earlier message was dropped.
    pub quoted: bool,
    /// A forwarded message was kept.
    pub forwarded: bool,
    /// A sign-off, signature or disclaimer was dropped.
    pub signed: bool,
}

/// The new text of `text` and what was dropped around it.
pub(crate) fn split(text: &str) -> (Cow<'_, str>, Shape) {
    let scanned = truncate_on_char_boundary(text, MAX_SCAN_BYTES);
    let lines: Vec<&str> = scanned.lines().collect();
    let mut shape =
        Shape { multiline: lines.iter().filter(|l| !l.trim().is_empty()).count() > 1, ..Shape::default() };
    if !shape.multiline {
        return (Cow::Borrowed(text), shape);
    }
    let (end, forward) = match lines.iter().enumerate().find_map(|(i, _)| quote_start(&lines, i)) {
        Some((i, kind)) => {
            shape.quoted = kind == QuoteKind::Reply;
            shape.forwarded = kind == QuoteKind::Forward;
            (i, (kind == QuoteKind::Forward).then_some(i))
        }
        None => (lines.len(), None),
    };
    let own = &lines[..end];
    let own_end = signature_start(own).unwrap_or(own.len());
    shape.signed = own_end < own.len();
    if own_end == lines.len() && scanned.len() == text.len() {
        return (Cow::Borrowed(text), shape);
    }
    let mut kept: Vec<&str> = own[..own_end].to_vec();
    if let Some(start) = forward {
        let forwarded = forwarded_text(&lines[start + 1..]);
        let forwarded_end = signature_start(&forwarded).unwrap_or(forwarded.len());
        kept.extend_from_slice(&forwarded[..forwarded_end]);
    }
    let kept = kept.join("\n");
    if kept.trim().is_empty() {
        // Nothing of the sender's own survived (a bare forward, or only a signature): read it all.
        return (Cow::Borrowed(text), shape);
    }
    (Cow::Owned(kept), shape)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuoteKind {
    Reply,
    Forward,
}

/// Lowercased, trimmed, without surrounding dashes, stars and spaces.
fn key(line: &str) -> String {
    line.trim().trim_matches(|c: char| c == '-' || c == '*' || c == '=' || c.is_whitespace()).to_lowercase()
}

fn starts_with_any(s: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|p| s.starts_with(p))
}

const HEADER_FIELDS: &[&str] =
    &["sent:", "date:", "to:", "subject:", "cc:", "enviado:", "fecha:", "para:", "asunto:", "enviado el:"];

/// Whether line `i` starts a quoted or forwarded part.
fn quote_start(lines: &[&str], i: usize) -> Option<(usize, QuoteKind)> {
    let raw = lines[i].trim();
    if raw.is_empty() {
        return None;
    }
    let k = key(raw);
    if k.contains("forwarded message") || k.starts_with("begin forwarded") || k.contains("mensaje reenviado")
    {
        return Some((i, QuoteKind::Forward));
    }
    if raw.starts_with('>') {
        return Some((i, QuoteKind::Reply));
    }
    if k.contains("original message") || k.contains("mensaje original") {
        return Some((i, QuoteKind::Reply));
    }
    if raw.len() >= 10 && raw.chars().all(|c| c == '_') {
        return Some((i, QuoteKind::Reply));
    }
    let next = lines.get(i + 1).map(|l| l.trim().to_lowercase()).unwrap_or_default();
    let wrote = |s: &str| s.ends_with("wrote:") || s.ends_with("escribió:") || s.ends_with("escribio:");
    if (k.starts_with("on ") || k.starts_with("el ")) && (wrote(&k) || wrote(&next)) {
        return Some((i, QuoteKind::Reply));
    }
    if starts_with_any(&k, &["from:", "de:"])
        && lines[i + 1..].iter().take(3).any(|l| starts_with_any(&l.trim().to_lowercase(), HEADER_FIELDS))
    {
        return Some((i, QuoteKind::Reply));
    }
    None
}

/// A forwarded block without its header lines and quote marks.
fn forwarded_text<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    let mut out = Vec::with_capacity(lines.len());
    let mut in_header = true;
    for line in lines {
        let t = line.trim_start().trim_start_matches('>').trim();
        let lower = t.to_lowercase();
        if in_header && (starts_with_any(&lower, &["from:", "de:"]) || starts_with_any(&lower, HEADER_FIELDS))
        {
            continue;
        }
        if !t.is_empty() {
            in_header = false;
        }
        out.push(t);
    }
    out
}

/// Lines that close a message: what follows them is a signature.
const SIGN_OFFS: &[&str] = &[
    "thanks",
    "thank you",
    "thanks again",
    "thank you very much",
    "many thanks",
    "thx",
    "tks",
    "ty",
    "regards",
    "best regards",
    "kind regards",
    "warm regards",
    "best",
    "all the best",
    "cheers",
    "sincerely",
    "respectfully",
    "thanks and regards",
    "thanks & regards",
    "saludos",
    "saludos cordiales",
    "un saludo",
    "atentamente",
    "cordialmente",
    "gracias",
    "muchas gracias",
    "mil gracias",
    "quedo atento",
    "quedo atenta",
    "quedo al pendiente",
    "quedo atento a sus comentarios",
    "quedamos atentos",
    "have a good day",
    "have a great day",
    "have a good one",
];

/// Lines that start a signature or a footer whatever precedes them.
const FOOTER_STARTS: &[&str] = &[
    "sent from my",
    "sent from outlook",
    "sent from yahoo",
    "get outlook for",
    "enviado desde mi",
    "enviado desde outlook",
    "obtener outlook para",
    "confidentiality notice",
    "confidentiality",
    "this email and any",
    "this e-mail and any",
    "this message and any",
    "this communication",
    "disclaimer",
    "aviso de confidencialidad",
    "aviso de privacidad",
    "este correo",
    "este mensaje",
];

/// The first line of the signature of `lines`, if any: never the first line with text.
fn signature_start(lines: &[&str]) -> Option<usize> {
    let first_text = lines.iter().position(|l| !l.trim().is_empty())?;
    lines.iter().enumerate().skip(first_text + 1).find_map(|(i, line)| {
        let raw = line.trim();
        if raw == "--" || raw == "—" || raw == "-- " {
            return Some(i);
        }
        let k = key(raw);
        let bare = k.trim_end_matches([',', '.', '!', ':']).trim();
        let sign_off = SIGN_OFFS.iter().any(|s| {
            // "Thanks," / "Thanks, Maria" / "Gracias!" but not "Thanks for the update, eta 3".
            bare == *s || bare.strip_prefix(s).is_some_and(|rest| rest.starts_with(',') && rest.len() <= 30)
        });
        (sign_off || starts_with_any(&k, FOOTER_STARTS)).then_some(i)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(text: &str) -> String {
        split(text).0.into_owned()
    }

    #[test]
    fn a_text_message_is_unchanged_and_borrowed() {
        let (b, shape) = split("eta 2:30");
        assert!(matches!(b, Cow::Borrowed("eta 2:30")));
        assert_eq!(shape, Shape::default());
        assert_eq!(body("thanks"), "thanks");
    }

    #[test]
    fn a_reply_keeps_its_new_text_and_drops_the_quoted_question_and_signature() {
        let email = "Hi team,\nDriver says he will be there around 3pm.\n\nThanks,\nMaria Lopez\nDispatch | Lopez Freight LLC\nMC# 123456 | 555-201-3344\n\nOn Tue, Mar 3, 2026 at 9:14 AM Loads Desk <loads@broker.example> wrote:\n> Hi, can you share an ETA to stop 2? What is the PO?\n";
        let (b, shape) = split(email);
        assert_eq!(b, "Hi team,\nDriver says he will be there around 3pm.\n");
        assert!(shape.multiline && shape.quoted && shape.signed && !shape.forwarded);
    }

    #[test]
    fn wrote_on_the_next_line_outlook_headers_and_spanish_quotes_are_quotes() {
        assert_eq!(
            body(
                "Llega a las 4\nEl mar, 3 mar 2026 a las 9:14, Mesa de Cargas <\ncargas@x.mx> escribió:\n> cual es su eta"
            ),
            "Llega a las 4"
        );
        assert_eq!(
            body(
                "truck is loaded\n\nFrom: Loads Desk <loads@x.com>\nSent: Tuesday\nTo: Maria\nSubject: Load 4812\nwhat is the eta"
            ),
            "truck is loaded\n"
        );
        assert_eq!(body("ok sounds good\n-----Original Message-----\nplease confirm eta"), "ok sounds good");
        assert_eq!(body("yes\n________________________________\nFrom: x"), "yes");
    }

    #[test]
    fn a_forward_keeps_the_forwarded_text_without_its_headers() {
        let email = "FYI see below from the driver\n\n---------- Forwarded message ---------\nFrom: Jose <+15550101>\nDate: Tue, Mar 3\nSubject: \n\ntruck broke down on I-10 near exit 12\n";
        let (b, shape) = split(email);
        assert!(b.contains("FYI see below from the driver"), "{b}");
        assert!(b.contains("truck broke down"), "{b}");
        assert!(!b.contains("Date:"), "{b}");
        assert!(shape.forwarded && !shape.quoted);
    }

    #[test]
    fn sign_offs_only_count_after_the_first_line_and_alone() {
        assert_eq!(body("Thanks,\nMaria"), "Thanks,\nMaria");
        assert_eq!(body("Thanks for the heads up\neta is 3pm"), "Thanks for the heads up\neta is 3pm");
        assert_eq!(body("eta 3pm\nSaludos cordiales\nJuan Perez\nTransportes JP"), "eta 3pm");
        assert_eq!(body("eta 3pm\n\nSent from my iPhone"), "eta 3pm\n");
        assert_eq!(
            body("he is empty and rolling\nCONFIDENTIALITY NOTICE: this email is for the addressee"),
            "he is empty and rolling"
        );
    }

    #[test]
    fn nothing_of_its_own_falls_back_to_the_whole_message() {
        let text = "> what is the eta\n> to stop 2";
        assert_eq!(body(text), text);
    }

    #[test]
    fn a_huge_thread_is_cut_before_it_is_scanned() {
        let mut text = String::from("eta 4pm\n");
        text.push_str(&"> quoted line\n".repeat(200_000));
        assert_eq!(body(&text), "eta 4pm");
    }
}
