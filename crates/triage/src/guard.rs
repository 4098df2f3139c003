//! The stop-request guard: a message that asks in so many words to stop the messages, or says
//! in so many words that it reached the wrong person, is never acted on as another intent.
//!
//! The model reads such a message right most of the time, but when the request sits next to
//! news ("ya llegué pero ya no me estén mandando textos") the news can outweigh it, and an
//! arrival acted on would be answered by SMS to someone who asked us to stop (behavior.md §6,
//! docs/triage.md). The cost is asymmetric, so this check does not weigh evidence: an explicit
//! phrase from the short list below, not negated, holds the message back for the planner (which
//! may not message carriers) unless the model's own top intent is already `opt_out` or
//! `wrong_number`. That includes a `problem_report`: the problem outranks the request in §6's
//! order, but a person should read both, and with no planner the message becomes an urgent task
//! for a person, as the problem itself would.
//!
//! The list is deliberately narrow: explicit requests and explicit statements, not the model's
//! broad opt-out cue family (`spam`, `block`, `no more`, a leading `stop`), which are common in
//! ordinary messages ("stop 3 done", "no more delays"). Phrases are sequences of normalized
//! tokens ([`crate::text`]): lowercase, accents folded, apostrophes dropped. They are matched by
//! the cue lexicon's phrase index ([`crate::cues::PhraseIndex`]) over the message's words as
//! the features read them ([`crate::cues::Words`], built once per message), but the guard adds
//! nothing to the features: the model never sees these lists.

use std::sync::OnceLock;

use crate::cues::{Gaps, PhraseIndex, Words};

/// Explicit requests to stop the messages, English and Spanish.
const STOP_REQUESTS: &[&str] = &[
    "stop texting",
    "stop txting",
    "stop textin",
    "stop sending me",
    "stop sending these",
    "stop sending texts",
    "stop sending messages",
    "stop messaging",
    "stop msging",
    "stop contacting",
    "stop emailing",
    "stop the texts",
    "stop these texts",
    "stop these messages",
    "stop with the texts",
    "quit texting",
    "quit txting",
    "quit textin",
    "quit sending me",
    "quit messaging",
    "quit blowing up",
    "stop blowing up",
    "blowing up my phone",
    "blowin up my phone",
    "dont text me",
    "do not text me",
    "dont text this",
    "do not text this",
    "dont txt me",
    "dont message me",
    "do not message me",
    "dont contact me",
    "do not contact me",
    "no more texts",
    "no more txts",
    "no more text messages",
    "no more automated",
    "remove me",
    "remove my number",
    "remove this number",
    "remove my phone",
    "take me off",
    "take my number off",
    "take this number off",
    "off your list",
    "off this list",
    "off the text list",
    "off this text list",
    "off your texting list",
    "off your contact list",
    "leave my phone alone",
    "number off your",
    "number off this",
    "number off the list",
    "number off whatever",
    "turn off the texts",
    "turn off these texts",
    "turn off the auto",
    "turn off the automated",
    "delete my number",
    "delete this number",
    "lose my number",
    "lose this number",
    "opt me out",
    "opt out",
    "optout",
    "unsubscribe",
    "stopall",
    "leave me alone",
    "no me manden",
    "no me mande",
    "no me escriban",
    "no me escriba",
    "no me envien",
    "no me esten mandando",
    "no me esten escribiendo",
    "no me esten enviando",
    "no me sigan mandando",
    "no me sigan escribiendo",
    "no me sigan enviando",
    "dejen de mandar",
    "dejen de escribir",
    "dejen de enviar",
    "dejen de mandarme",
    "dejen de escribirme",
    "deja de mandar",
    "deja de escribir",
    "deja de mandarme",
    "deja de escribirme",
    "no quiero recibir",
    "no quiero mas mensajes",
    "no mas mensajes",
    "no mas textos",
    "quitenme",
    "quiteme",
    "darme de baja",
    "denme de baja",
    "bajenme",
    "no me molesten",
    "no manden mensajes",
    "no manden mas",
    "ya no manden",
    "borren mi numero",
    "saquen mi numero",
    "saquen nuestro numero",
    "saquen este numero",
    "quiten mi numero",
    "quiten este numero",
    "cancelen los mensajes",
    "borren este numero",
];

/// Explicit statements that the message reached the wrong person.
const WRONG_PERSON: &[&str] = &[
    "wrong number",
    "wrong #",
    "wrong phone number",
    "wrong person",
    "meant for someone else",
    "numero equivocado",
    "numero incorrecto",
    "equivocado de numero",
    "equivocaron de numero",
    "no longer with",
    "no longer work",
    "no longer drive",
    "dont drive for",
    "dont work for",
    "dont work there",
    "ya no trabajo",
    "ya no manejo",
    "ya no estoy con",
    "numero ya no es",
    "ya no es el numero",
];

/// Words after a phrase ending in "number" or "#" that make it about a document, not the
/// phone ("the wrong number on the BOL", "wrong # in the PO").
const DOCUMENT_FOLLOWERS: &[&str] = &["on", "in", "of"];

/// The phrases of both lists in one index, built once; each knows whether it ends in "number"
/// or "#" (and so may be about a document).
fn phrases() -> &'static PhraseIndex<EndsInNumber> {
    static PHRASES: OnceLock<PhraseIndex<EndsInNumber>> = OnceLock::new();
    PHRASES.get_or_init(|| {
        let mut index = PhraseIndex::new();
        for &phrase in STOP_REQUESTS.iter().chain(WRONG_PERSON) {
            let last = phrase.rsplit(' ').next();
            index.insert(phrase, EndsInNumber(matches!(last, Some("number" | "#"))));
        }
        index
    })
}

/// Whether a phrase ends in "number" or "#".
struct EndsInNumber(bool);

/// Whether the words of a message's new text hold an explicit stop request or wrong-person
/// statement that no negator in the two words before it turns around ("I never said stop
/// texting" is not one; "dont text me" is, its own negator being part of the phrase). Commas
/// do not count as words here: "stop, texting" is a request.
pub(crate) fn asks_to_stop(words: &Words<'_>) -> bool {
    let phrases = phrases();
    (0..words.len()).any(|at| {
        phrases.matches_at(words, at, Gaps::Commas).any(|(ends_in_number, last)| {
            let about_a_document = ends_in_number.0
                && words
                    .next_from(last + 1, Gaps::Commas)
                    .and_then(|next| words.get(next))
                    .is_some_and(|next| DOCUMENT_FOLLOWERS.contains(&next));
            !about_a_document && !words.negated_before(at, 2, Gaps::Commas)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{lex, normalize};

    fn asks(s: &str) -> bool {
        let n = normalize(s);
        asks_to_stop(&Words::of(&lex(&n)))
    }

    #[test]
    fn explicit_requests_in_either_language_are_found_next_to_news() {
        assert!(asks("ya llegué pero ya no me estén mandando textos, me distraen"));
        assert!(asks("Delivered. Please STOP texting me!!"));
        assert!(asks("at the shipper now. Don't text me again"));
        assert!(asks("quítenme de la lista, llego a las 5"));
        assert!(asks("Please remove me from these automated notifications."));
        assert!(asks("I don't drive for Rojas Trucking anymore"));
        assert!(asks("este numero ya no es de el"));
        assert!(asks("wrong #"));
    }

    #[test]
    fn commas_are_not_words_to_the_guard() {
        // The cue lexicon reads a comma as a word; the guard reads past it, in the phrase, in
        // the two words before it and in the word after it.
        assert!(asks("stop, texting me"));
        assert!(asks("remove , me"));
        assert!(!asks("no, remove me"));
        assert!(!asks("shipper put the wrong number, on the BOL"));
    }

    #[test]
    fn ordinary_messages_and_negated_phrases_are_not_requests() {
        assert!(!asks("stop 3 done, heading to stop 4"));
        assert!(!asks("text me the address"));
        assert!(!asks("my phone died thats why"));
        assert!(!asks("no more delays, eta 3pm"));
        assert!(!asks("I never said stop texting, just send the PO"));
        assert!(!asks("what number should I call"));
        assert!(!asks("mándame la dirección porfa"));
        assert!(!asks("at delivery, shipper put the wrong number on the BOL"));
    }
}
