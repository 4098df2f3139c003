//! Domain cue lexicon: words and short phrases that signal an intent family.
//!
//! The corpus has a few dozen examples per intent, too few for n-grams alone
//! to learn that "blowout", "wreck" and "se poncho" all mean trouble. The
//! lexicon carries that domain knowledge; the model still decides, it only
//! sees `cue:<family>` features (and their crosses with question shape), so a
//! cue can be outweighed by the rest of the message.
//!
//! Patterns are sequences of normalized token texts (see [`crate::text`]);
//! a single word ending in `*` matches by prefix (`damag*`: damage, damaged).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::text::{Tok, TokKind};

/// A family of cues; the names are feature strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Cue {
    Eta,
    Arrival,
    Departure,
    Temperature,
    Po,
    Appointment,
    Address,
    Confusion,
    Ack,
    OptOut,
    WrongNumber,
    Problem,
    Greeting,
    Paperwork,
    Money,
    Amenity,
    Request,
    Call,
    Question,
}

impl Cue {
    const ALL: [Cue; 19] = [
        Cue::Eta,
        Cue::Arrival,
        Cue::Departure,
        Cue::Temperature,
        Cue::Po,
        Cue::Appointment,
        Cue::Address,
        Cue::Confusion,
        Cue::Ack,
        Cue::OptOut,
        Cue::WrongNumber,
        Cue::Problem,
        Cue::Greeting,
        Cue::Paperwork,
        Cue::Money,
        Cue::Amenity,
        Cue::Request,
        Cue::Call,
        Cue::Question,
    ];
    const COUNT: usize = Cue::ALL.len();

    pub(crate) const fn name(self) -> &'static str {
        match self {
            Cue::Eta => "eta",
            Cue::Arrival => "arrival",
            Cue::Departure => "departure",
            Cue::Temperature => "temperature",
            Cue::Po => "po",
            Cue::Appointment => "appointment",
            Cue::Address => "address",
            Cue::Confusion => "confusion",
            Cue::Ack => "ack",
            Cue::OptOut => "opt_out",
            Cue::WrongNumber => "wrong_number",
            Cue::Problem => "problem",
            Cue::Greeting => "greeting",
            Cue::Paperwork => "paperwork",
            Cue::Money => "money",
            Cue::Amenity => "amenity",
            Cue::Request => "request",
            Cue::Call => "call",
            Cue::Question => "question",
        }
    }
}

const LEXICON: &[(Cue, &[&str])] = &[
    (
        Cue::Eta,
        &[
            "eta",
            "out",
            "away",
            "min",
            "mins",
            "minutes",
            "hr",
            "hrs",
            "hour",
            "hours",
            "be there",
            "arrive",
            "arriving",
            "arrival time",
            "should be",
            "should make",
            "close",
            "almost there",
            "on my way",
            "llego",
            "llegando",
            "faltan",
            "estoy a",
            "minutos",
            "horas",
            "hora",
            "voy llegando",
            "gps says",
            "google says",
            "ill be",
            "will be",
            "gonna be",
            "be at",
            "tomorrow",
            "tmrw",
            "manana",
            "give or take",
            "mas o menos",
            "estimates",
            "rolling in",
        ],
    ),
    (
        Cue::Arrival,
        &[
            "here",
            "arrived",
            "checked in",
            "check in",
            "checking in",
            "on site",
            "onsite",
            "dock",
            "gate",
            "door",
            "yard",
            "lot",
            "pulled in",
            "pulling in",
            "rolled in",
            "made it",
            "got here",
            "backed in",
            "just got",
            "in line",
            "guard shack",
            "llegue",
            "llegamos",
            "ya llego",
            "estoy aqui",
            "aqui estoy",
            "ya estoy",
            "estoy en",
            "registre",
            "puerta",
            "yarda",
            "entrada",
            "parking lot",
            "on the lot",
            "at the stop",
            "at the warehouse",
            "at the dc",
            "at the plant",
            "at the facility",
        ],
    ),
    (
        Cue::Departure,
        &[
            "loaded",
            "rolling",
            "empty",
            "mt",
            "leaving",
            "left",
            "departed",
            "depart*",
            "heading out",
            "headed",
            "heading",
            "pulling out",
            "on the road",
            "outta",
            "unloaded",
            "done",
            "finished",
            "en camino",
            "saliendo",
            "sali",
            "salio",
            "cargado",
            "cargaron",
            "vacio",
            "descargue",
            "rodando",
            "me voy",
            "termine",
            "out the gate",
            "off the dock",
            "good to go",
            "on its way",
            "en route",
            "on my way out",
            "way out",
            "out of the",
            "next stop",
        ],
    ),
    (
        Cue::Temperature,
        &[
            "temp",
            "temps",
            "temperature",
            "reefer",
            "degrees",
            "grados",
            "running",
            "holding",
            "reading",
            "reads",
            "thermostat",
            "termo",
            "set",
            "box",
            "supply",
            "return air",
            "pulp",
            "temperatura",
            "marca",
            "continuous",
            "f",
            "coming down",
            "pulling down",
        ],
    ),
    (
        Cue::Po,
        &[
            "po",
            "pos",
            "purchase order",
            "order number",
            "pu number",
            "pickup number",
            "pick up number",
            "reference number",
            "ref",
            "orden de compra",
            "numero de orden",
            "numero de po",
            "confirmation number",
            "order",
            "pickup #",
            "pu #",
            "pick up #",
        ],
    ),
    (
        Cue::Appointment,
        &[
            "appt",
            "appointment",
            "appts",
            "appointments",
            "cita",
            "window",
            "what time",
            "a que hora",
            "que hora",
            "when",
            "schedule*",
            "fcfs",
            "open",
            "expecting",
            "what day",
            "hora de",
            "cuando",
            "by what time",
            "set time",
            "deliver by",
            "time",
        ],
    ),
    (
        Cue::Address,
        &[
            "address",
            "addy",
            "direccion",
            "location",
            "where",
            "wheres",
            "donde",
            "city",
            "street",
            "st",
            "zip",
            "located",
            "a donde",
            "queda",
            "entrance",
            "dead end",
            "exactly",
        ],
    ),
    (
        Cue::Confusion,
        &[
            "huh",
            "wdym",
            "dont understand",
            "dont get it",
            "confused",
            "what do you mean",
            "what are you",
            "what are u",
            "which load",
            "what load",
            "say again",
            "come again",
            "no entiendo",
            "que quieres decir",
            "mande",
            "de que",
            "cual carga",
            "not following",
            "not sure what",
            "what is this",
            "for what",
            "of what",
            "eh",
            "sorry what",
            "clarify",
            "no se de que",
            "idk what",
            "talking about",
            "talkin about",
            "como",
        ],
    ),
    (
        Cue::Ack,
        &[
            "ok",
            "okay",
            "k",
            "kk",
            "thanks",
            "thank you",
            "thx",
            "ty",
            "copy",
            "roger",
            "10 - 4",
            "10 4",
            "10 / 4",
            "got it",
            "gotcha",
            "will do",
            "sounds good",
            "cool",
            "bet",
            "yes",
            "yep",
            "yup",
            "understood",
            "received",
            "noted",
            "gracias",
            "enterado",
            "esta bien",
            "va",
            "sale",
            "listo",
            "entendido",
            "de acuerdo",
            "claro",
            "orale",
            "np",
            "no problem",
            "appreciate",
            "perfect",
            "alright",
            "sure",
            "si",
            "👍",
            "👌",
            "🙏",
            "will update",
            "will let",
            "te aviso",
            "let you know",
        ],
    ),
    (
        Cue::OptOut,
        &[
            "^stop",
            "stopall",
            "unsubscribe",
            "unsub",
            "opt out",
            "optout",
            "quit texting",
            "quit messaging",
            "stop texting",
            "stop sending",
            "stop msg",
            "stop contacting",
            "dont text",
            "do not text",
            "no more texts",
            "no texts",
            "remove my",
            "remove me",
            "remove this number",
            "take me off",
            "^cancel",
            "^end",
            "leave me alone",
            "no me manden",
            "dejen de",
            "no quiero mas",
            "no me escriban",
            "quitenme",
            "^alto",
            "basta",
            "paren",
            "these texts",
            "these messages",
            "automated messages",
            "quit sending",
            "more texts",
            "more messages",
            "recibir mensajes",
            "mas mensajes",
            "stop messaging",
            "please stop",
            "stop pls",
            "stop please",
            "^remove",
            "opt me out",
            "dont message",
            "not message",
            "dont contact",
            "not contact",
            "no me escriban",
            "no me manden nada",
            "dont send",
        ],
    ),
    (
        Cue::WrongNumber,
        &[
            "wrong number",
            "wrong #",
            "wrong person",
            "wrong guy",
            "wrong phone",
            "wrong email",
            "wrong contact",
            "wrong dispatcher",
            "not the driver",
            "not a driver",
            "not a truck",
            "not a trucker",
            "no soy",
            "equivocado",
            "equivoco",
            "dont work there",
            "dont drive for",
            "no longer with",
            "never heard",
            "this isnt",
            "this is not",
            "this aint",
            "not me",
            "landline",
            "personal phone",
            "not my truck",
            "no trabajo",
            "no conozco",
            "no hay ningun",
            "not the guy",
            "no driver by",
            "not ours",
            "theres no",
            "not the correct",
            "new number",
            "isnt with",
            "doesnt belong",
            "not belong",
            "not who",
            "by that name",
            "right number",
            "dont know who",
            "never drove",
            "no es el numero",
            "ningun chofer",
            "someone else",
            "changed numbers",
            "business line",
        ],
    ),
    (
        Cue::Problem,
        &[
            "broke",
            "broken",
            "breakdown",
            "broke down",
            "accident",
            "wreck",
            "crash",
            "flat",
            "tire",
            "blowout",
            "blew",
            "blown",
            "alarm",
            "closed",
            "closure",
            "detour*",
            "rerout*",
            "refus*",
            "reject*",
            "damag*",
            "leak*",
            "stuck",
            "shop",
            "mechanic",
            "tow",
            "inspection",
            "dot",
            "overweight",
            "ticket",
            "hurt",
            "injur*",
            "sick",
            "fail*",
            "not cooling",
            "wont start",
            "wont close",
            "no door",
            "detention",
            "shut",
            "snow",
            "storm",
            "ice",
            "chains",
            "engine",
            "brake",
            "cancelled",
            "short",
            "shifted",
            "broke into",
            "stolen",
            "climbing",
            "rising",
            "busted",
            "cracked",
            "gelled",
            "issue",
            "problem",
            "not ready",
            "wont load",
            "wont unload",
            "wont let",
            "not safe",
            "quit",
            "out of hours",
            "holding me",
            "road service",
            "wont hold",
            "bridge out",
            "danad*",
            "not moving",
            "is down",
            "unit down",
            "truck down",
            "tractor down",
            "reefer down",
            "went down",
            "its down",
            "died",
            "dead",
            "out of service",
            "falla*",
            "varad*",
            "no arranca",
            "golpe",
            "quit on",
            "out of fuel",
            "sin diesel",
            "ice*",
            "nieve",
            "emergency",
            "emergencia",
            "too heavy",
            "permit",
            "lost my",
            "still not",
            "turned me away",
            "descompuso",
            "poncho",
            "ponchada",
            "llanta",
            "accidente",
            "choque",
            "cerraron",
            "desvi*",
            "rechaz*",
            "fuga",
            "dano",
            "no enfria",
            "alarma",
            "no prende",
            "bascula",
            "grua",
            "no me quieren",
            "se me acabaron",
            "parado",
            "border",
            "customs",
            "hours no",
            "got hit",
            "hit",
            "asap",
            "advise",
            "nobody",
            "wet",
            "hose",
            "seal",
            "help",
        ],
    ),
    (
        Cue::Greeting,
        &[
            "hello",
            "hi",
            "hey",
            "hola",
            "good morning",
            "good afternoon",
            "buenos dias",
            "buenas",
            "merry",
            "happy",
            "morning",
        ],
    ),
    (
        Cue::Paperwork,
        &[
            "bol",
            "pod",
            "paperwork",
            "papeles",
            "invoice",
            "factura",
            "attached",
            "attach*",
            "pics",
            "pictures",
            "photo",
            "foto",
            "rate con",
            "rate confirmation",
            "tender",
            "scale ticket",
            "receipt",
            "recibo",
            "signed",
            "load info",
            "tablet",
            "email",
        ],
    ),
    (
        Cue::Money,
        &[
            "pay",
            "paid",
            "pagan",
            "rate",
            "advance",
            "adelanto",
            "comcheck",
            "lumper",
            "tonu",
            "quick pay",
            "fee",
            "cost",
            "cover",
            "cash",
            "money",
            "dinero",
            "cuanto",
        ],
    ),
    (
        Cue::Amenity,
        &[
            "park",
            "parking",
            "overnight",
            "sleep",
            "restroom",
            "bathroom",
            "shower",
            "food",
            "estacionar",
            "dormir",
            "bano",
            "dog",
            "wife",
            "rider",
            "ride along",
            "rides along",
        ],
    ),
    (
        Cue::Request,
        &[
            "reschedule",
            "resched",
            "move",
            "change",
            "push",
            "add",
            "update",
            "switch",
            "arrange",
            "cambiar",
            "mover",
            "possible",
            "can we",
            "could we",
            "we need",
        ],
    ),
    (Cue::Call, &["call", "call me", "llamar", "llamame", "phone", "phone number", "contact"]),
    (
        Cue::Question,
        &[
            "what",
            "whats",
            "wat",
            "when",
            "where",
            "wheres",
            "which",
            "how",
            "who",
            "whos",
            "can",
            "could",
            "do",
            "does",
            "is",
            "are",
            "cual",
            "donde",
            "cuando",
            "que",
            "quien",
            "cuanto",
            "cuantas",
            "cuantos",
            "necesito",
            "need",
            "send",
            "me pasas",
            "me mandas",
            "me pueden",
            "please provide",
            "can you",
            "can u",
            "any",
            "?",
        ],
    ),
];

/// A cue family found in a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CueHit {
    pub cue: Cue,
    /// A match begins at one of the first two tokens ("ok thanks" vs "is that ok").
    pub at_start: bool,
    /// A negation precedes the first match within three tokens ("still not loaded").
    pub negated: bool,
}

/// Words that negate what follows them.
pub(crate) const NEGATORS: &[&str] = &[
    "not", "no", "never", "dont", "cant", "wont", "isnt", "arent", "didnt", "doesnt", "havent", "hasnt",
    "aint", "nobody", "nothing", "nada", "nunca", "ni", "without", "sin", "cannot",
];

/// One lexicon pattern, split once.
struct Pattern {
    cue: Cue,
    /// Tokens after the first.
    rest: Vec<&'static str>,
    /// Matches only at the first token.
    anchored: bool,
}

/// The lexicon indexed by first token, built once: matching a message costs
/// one hash lookup per token instead of a scan of every pattern.
struct Compiled {
    by_first: HashMap<&'static str, Vec<Pattern>>,
    /// Single-word prefix patterns (`damag*`), checked against every token.
    prefixes: Vec<(Cue, &'static str)>,
}

fn compiled() -> &'static Compiled {
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    COMPILED.get_or_init(|| {
        let mut by_first: HashMap<&'static str, Vec<Pattern>> = HashMap::new();
        let mut prefixes = Vec::new();
        for &(cue, patterns) in LEXICON {
            for &pattern in patterns {
                let (anchored, pattern) = match pattern.strip_prefix('^') {
                    Some(rest) => (true, rest),
                    None => (false, pattern),
                };
                let mut parts = pattern.split(' ');
                let first = parts.next().unwrap_or_default();
                let rest: Vec<&'static str> = parts.collect();
                match first.strip_suffix('*') {
                    Some(prefix) if rest.is_empty() => prefixes.push((cue, prefix)),
                    _ => by_first.entry(first).or_default().push(Pattern { cue, rest, anchored }),
                }
            }
        }
        Compiled { by_first, prefixes }
    })
}

/// The cue families present in the tokens, each once, in [`Cue`] order.
pub(crate) fn cues_in(toks: &[Tok<'_>]) -> Vec<CueHit> {
    let texts: Vec<&str> = toks
        .iter()
        .filter(|t| !(t.kind == TokKind::Sym && matches!(t.text, "." | "!")))
        .map(|t| t.text)
        .collect();
    let lexicon = compiled();
    // First match position per cue family.
    let mut first: [Option<usize>; Cue::COUNT] = [None; Cue::COUNT];
    let mut record = |cue: Cue, at: usize| {
        let slot = &mut first[cue as usize];
        if slot.is_none_or(|prev| at < prev) {
            *slot = Some(at);
        }
    };
    for (i, text) in texts.iter().enumerate() {
        if let Some(patterns) = lexicon.by_first.get(text) {
            for p in patterns {
                let rest_matches = texts.get(i + 1..i + 1 + p.rest.len()) == Some(p.rest.as_slice());
                if rest_matches && (!p.anchored || i == 0) {
                    record(p.cue, i);
                }
            }
        }
        for &(cue, prefix) in &lexicon.prefixes {
            if text.starts_with(prefix) {
                record(cue, i);
            }
        }
    }
    Cue::ALL
        .iter()
        .zip(first)
        .filter_map(|(&cue, at)| {
            let at = at?;
            Some(CueHit {
                cue,
                at_start: at < 2,
                negated: texts[at.saturating_sub(3)..at].iter().any(|t| NEGATORS.contains(t)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{lex, normalize};

    fn cues(s: &str) -> Vec<Cue> {
        let n = normalize(s);
        cues_in(&lex(&n)).into_iter().map(|h| h.cue).collect()
    }

    #[test]
    fn all_lists_every_family_at_its_index() {
        for (i, cue) in Cue::ALL.iter().enumerate() {
            assert_eq!(*cue as usize, i);
        }
        assert_eq!(LEXICON.len(), Cue::COUNT);
    }

    #[test]
    fn finds_words_phrases_and_prefixes() {
        assert!(cues("truck got damaged").contains(&Cue::Problem));
        assert!(cues("10-4").contains(&Cue::Ack));
        assert!(cues("no me manden mensajes").contains(&Cue::OptOut));
        assert!(cues("this isnt mike").contains(&Cue::WrongNumber));
        assert!(!cues("ok").contains(&Cue::Problem));
        assert!(cues("").is_empty());
    }

    #[test]
    fn anchored_patterns_only_match_at_the_start() {
        assert!(cues("STOP").contains(&Cue::OptOut));
        assert!(!cues("im at the stop").contains(&Cue::OptOut));
        let n = normalize("is that ok");
        let hits = cues_in(&lex(&n));
        assert!(hits.iter().any(|h| h.cue == Cue::Ack && !h.at_start));
    }
}
