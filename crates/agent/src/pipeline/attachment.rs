//! Attachments: a document from a known sender is read (or its fields extracted upstream are
//! used) and noted in the TMS, with a Hero task to review exceptions or an unsigned POD; an
//! unknown sender or an unreadable document is a Hero task.

use load_agent_domain::{ActionBody, DecisionPath};
use load_agent_llm::{DocumentRequest, validate_document_fields};

use super::decision::Decision;
use super::{Deps, fmt_temp};
use crate::context::Ctx;

pub(super) async fn on_attachment(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    deps: &Deps<'_>,
    from: &str,
    filename: &str,
    req: DocumentRequest,
) {
    let sender = ctx.load.resolve_sender(from);
    let mut f = ctx.fields(None, sender);
    f.insert(
        "sender",
        sender.map(|c| format!("{} ({})", c.name, c.role.as_str())).unwrap_or_else(|| from.into()),
    );
    f.insert("document", filename.to_string());
    if sender.is_none() {
        d.path = DecisionPath::Triage;
        f.insert("text", format!("attachment {filename}"));
        d.hero(ctx, "hero_unknown_sender", &f, false, None);
        d.rationale(format!("attachment from unknown sender {from}"));
        return;
    }
    // Fields extracted upstream are used as they are (checked as a reader's output is): the
    // reader is called only when the event carries none, so the live consumer and a replay of
    // the same records decide alike whatever LLM provider is configured.
    let read = match &req.extracted {
        Some(fields) => validate_document_fields(fields.clone()).map(|doc| (doc, None, "extracted upstream")),
        None => deps.llm.extract_document(&req).await.map(|o| (o.value, Some(o.usage), "read")),
    };
    match read {
        Ok((doc, usage, how)) => {
            d.usage.extend(usage);
            d.path = DecisionPath::Sop;
            let yn = |b: Option<bool>| match b {
                Some(true) => "yes",
                Some(false) => "no",
                None => "unknown",
            };
            let summary = format!(
                "type {}, signed {}, exceptions noted {}, POs [{}], seal {}, pieces {}, temperature {}",
                doc.document_type.as_str(),
                yn(doc.signed),
                yn(doc.exceptions_noted),
                doc.po_numbers.join(", "),
                doc.seal.as_deref().unwrap_or("none"),
                doc.pieces.map(|p| p.to_string()).unwrap_or_else(|| "unknown".into()),
                doc.temperature_f.map(|t| format!("{}°F", fmt_temp(t))).unwrap_or_else(|| "none".into()),
            );
            f.insert("reason", summary.clone());
            let note = ctx.render("tms_document", load_agent_domain::Language::En, &f);
            d.propose(None, ActionBody::TmsNote { text: note.body });
            let unsigned_pod =
                doc.document_type == load_agent_domain::DocumentType::Pod && doc.signed != Some(true);
            if doc.exceptions_noted == Some(true) || unsigned_pod {
                let why =
                    if doc.exceptions_noted == Some(true) { "exceptions noted" } else { "POD not signed" };
                f.insert("reason", why.to_string());
                d.hero(ctx, "hero_document_review", &f, false, None);
            }
            d.rationale(format!("document {how}: {summary}"));
        }
        Err(e) => {
            d.path = DecisionPath::HeroFallback;
            f.insert("reason", e.to_string());
            d.hero(ctx, "hero_document_unreadable", &f, true, None);
            d.rationale(format!("document reader failed: {e}"));
        }
    }
}
