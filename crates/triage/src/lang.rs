//! Cheap English/Spanish detection from small word lists.
//!
//! Replies must use the contact's language; when the load does not say, the
//! message's language decides. Messages are short and often Spanglish
//! ("ya estoy en el shipper"), so this counts marker words, with the strongest
//! Spanish markers (verbs drivers use in status texts) counting double.

use serde::{Deserialize, Serialize};

use crate::text::{Tok, TokKind};

load_agent_domain::spelled_enum! {
    /// A language triage understands; its spelling is the language code.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Lang {
        /// English (`en`), the default.
        En => "en",
        /// Spanish (`es`).
        Es => "es",
    }
}

/// Spanish words that are almost never English, counted twice.
const ES_STRONG: &[&str] = &[
    "estoy",
    "llegue",
    "llego",
    "llegamos",
    "voy",
    "vamos",
    "cual",
    "donde",
    "cuando",
    "entrega",
    "direccion",
    "mensajes",
    "gracias",
    "aqui",
    "ahorita",
    "manana",
    "horas",
    "minutos",
    "entiendo",
    "equivocado",
    "numero",
    "cita",
    "recoleccion",
    "grados",
    "temperatura",
    "salgo",
    "saliendo",
    "cargado",
    "vacio",
    "descargado",
    "problema",
    "llanta",
    "ponchada",
    "porfa",
    "necesito",
    "tengo",
    "todavia",
    "estamos",
    "esta",
    "caja",
    "bueno",
    "quien",
    "soy",
    "perdon",
    "mande",
    "manden",
    "favor",
    "camion",
    "descargar",
    "cargar",
    "listo",
    "lista",
    "ya",
];

/// Spanish words that are common but could appear in English text.
const ES_WEAK: &[&str] = &[
    "el", "la", "los", "las", "de", "del", "que", "en", "es", "y", "por", "para", "con", "mi", "un", "una",
    "lo", "al", "hora", "tarde", "noche", "se", "le", "te", "su", "nos", "hay", "pero", "mas", "bien",
    "dale", "claro", "oye", "aun", "como", "ese", "esa", "este", "muy", "si", "sale", "hola",
];

const EN: &[&str] = &[
    "the", "i", "im", "is", "at", "to", "my", "we", "you", "be", "in", "on", "and", "for", "of", "it",
    "this", "what", "whats", "where", "when", "will", "am", "get", "got", "here", "out", "there", "just",
    "now", "please", "pls", "thanks", "thank", "yes", "can", "do", "does", "your", "with", "from", "about",
    "bout", "gonna", "going", "running", "late", "number", "wrong", "need", "loaded", "empty", "heading",
    "truck", "broke", "down", "appt", "address", "hour", "hours", "min", "mins", "minutes", "are", "have",
    "has", "who", "how", "that", "up", "rn", "ill", "be", "driver", "should", "by", "around", "they", "he",
    "she", "not", "dont", "cant", "our", "us", "hey", "sorry", "yeah", "yep", "thx", "ty", "hi", "hello",
];

/// Detects the language of lexed, normalized tokens; `hint` (the contact's
/// known language) breaks ties and decides when the text has no marker words.
pub(crate) fn detect(toks: &[Tok<'_>], hint: Option<Lang>) -> Lang {
    let (mut es, mut en) = (0u32, 0u32);
    for t in toks.iter().filter(|t| t.kind == TokKind::Word) {
        let w = t.text;
        if ES_STRONG.contains(&w) {
            es += 2;
        } else if ES_WEAK.contains(&w) {
            es += 1;
        } else if EN.contains(&w) {
            en += 1;
        }
    }
    match es.cmp(&en) {
        std::cmp::Ordering::Greater => Lang::Es,
        std::cmp::Ordering::Less => Lang::En,
        std::cmp::Ordering::Equal => hint.unwrap_or(Lang::En),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{lex, normalize};

    fn lang_of(s: &str, hint: Option<Lang>) -> Lang {
        let norm = normalize(s);
        detect(&lex(&norm), hint)
    }

    #[test]
    fn detects_english_spanish_and_spanglish() {
        assert_eq!(lang_of("bout 45 min out", None), Lang::En);
        assert_eq!(lang_of("ya llegué", None), Lang::Es);
        assert_eq!(lang_of("ya estoy en el shipper", None), Lang::Es);
        assert_eq!(lang_of("cual es el PO", None), Lang::Es);
        assert_eq!(lang_of("llego en 20 min", None), Lang::Es);
        assert_eq!(lang_of("whats the po# for this one", None), Lang::En);
    }

    #[test]
    fn no_signal_falls_back_to_the_hint_then_english() {
        assert_eq!(lang_of("34", Some(Lang::Es)), Lang::Es);
        assert_eq!(lang_of("👍", None), Lang::En);
        assert_eq!(lang_of("ok", Some(Lang::Es)), Lang::Es);
    }

    #[test]
    fn codes_round_trip() {
        assert_eq!("es".parse::<Lang>(), Ok(Lang::Es));
        assert!("fr".parse::<Lang>().is_err());
        assert_eq!(Lang::En.to_string(), "en");
        for lang in Lang::ALL {
            let json = serde_json::to_string(&lang).expect("a unit variant serializes");
            assert_eq!(json, format!("\"{}\"", lang.as_str()));
        }
    }
}
