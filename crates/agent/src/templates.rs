//! Message templates (ADR 0004's role): every body the agent sends is a template filled with
//! load data. Carrier-facing templates exist in English and Spanish; the contact's language picks.

use std::collections::BTreeMap;

use load_agent_domain::Language;
use serde::Deserialize;

use crate::yaml_error::split_yaml_error;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LangText {
    pub en: String,
    #[serde(default)]
    pub es: Option<String>,
}

impl LangText {
    fn pick(&self, lang: Language) -> &str {
        match lang {
            Language::Es => self.es.as_deref().unwrap_or(&self.en),
            Language::En => &self.en,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub subject: Option<LangText>,
    #[serde(flatten)]
    pub body: LangText,
}

/// A filled template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub title: String,
    pub subject: String,
    pub body: String,
}

#[derive(Debug, Clone, Default)]
pub struct Templates {
    templates: BTreeMap<String, Template>,
}

/// Values to fill placeholders with.
pub type Fields = BTreeMap<&'static str, String>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {problem}")]
pub struct TemplateError {
    pub file: String,
    pub field: String,
    pub problem: String,
}

const EMBEDDED: &str = include_str!("../../../sops/templates.yaml");

impl Templates {
    pub fn embedded() -> Result<Self, TemplateError> {
        Self::parse("sops/templates.yaml", EMBEDDED)
    }

    pub fn parse(file: &str, text: &str) -> Result<Self, TemplateError> {
        let templates: BTreeMap<String, Template> = serde_yaml::from_str(text).map_err(|e| {
            let (field, problem) = split_yaml_error(&e.to_string());
            TemplateError { file: file.into(), field, problem }
        })?;
        for (id, t) in &templates {
            for (field, text) in [("en", Some(&t.body.en)), ("es", t.body.es.as_ref())]
                .into_iter()
                .filter_map(|(f, t)| Some((f, t?)))
            {
                if let Some(bad) = unknown_placeholder(text) {
                    return Err(TemplateError {
                        file: file.into(),
                        field: format!("{id}.{field}"),
                        problem: format!("unknown placeholder {{{bad}}}"),
                    });
                }
            }
        }
        Ok(Templates { templates })
    }

    pub fn get(&self, id: &str) -> Option<&Template> {
        self.templates.get(id)
    }

    /// Fills a template. A missing template or field renders as a visible marker rather than
    /// failing: templates are checked when SOPs load, so this only guards against drift.
    pub fn render(&self, id: &str, lang: Language, fields: &Fields) -> Rendered {
        let Some(t) = self.templates.get(id) else {
            return Rendered {
                title: id.to_string(),
                subject: id.to_string(),
                body: format!("[template {id} missing]"),
            };
        };
        Rendered {
            title: t.title.as_deref().map(|s| fill(s, fields)).unwrap_or_default(),
            subject: t.subject.as_ref().map(|s| fill(s.pick(lang), fields)).unwrap_or_default(),
            body: fill(t.body.pick(lang), fields),
        }
    }
}

pub const PLACEHOLDERS: &[&str] = &[
    "load_id",
    "contact_name",
    "stop_name",
    "stop_address",
    "stop_kind",
    "appointment",
    "po_numbers",
    "eta",
    "reading",
    "range",
    "sender",
    "action",
    "reason",
    "text",
    "question",
    "stage",
    "document",
    "driver_name",
    "driver_phone",
];

fn unknown_placeholder(text: &str) -> Option<String> {
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        let end = after.find('}')?;
        let name = &after[..end];
        if !PLACEHOLDERS.contains(&name) {
            return Some(name.to_string());
        }
        rest = &after[end + 1..];
    }
    None
}

fn fill(text: &str, fields: &Fields) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(end) => {
                let name = &after[..end];
                match fields.get(name) {
                    Some(v) => out.push_str(v),
                    None => {
                        out.push('{');
                        out.push_str(name);
                        out.push('}');
                    }
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_templates_parse_and_fill_by_language() {
        let t = Templates::embedded().expect("templates");
        let mut f = Fields::new();
        f.insert("contact_name", "Luis".into());
        f.insert("load_id", "481207".into());
        f.insert("stop_name", "Acme DC".into());
        let en = t.render("eta_request", Language::En, &f);
        assert!(en.body.contains("Acme DC") && en.body.contains("ETA"));
        let es = t.render("eta_request", Language::Es, &f);
        assert!(es.body.contains("Acme DC") && es.body.contains("llegada"));
    }

    #[test]
    fn an_unknown_placeholder_names_the_template_and_field() {
        let err = Templates::parse("t.yaml", "x:\n  en: \"hi {nope}\"\n").unwrap_err();
        assert_eq!((err.field.as_str(), err.problem.as_str()), ("x.en", "unknown placeholder {nope}"));
    }
}
