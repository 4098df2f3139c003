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

load_agent_domain::spelled_enum! {
    /// A family of cues; the spellings (`as_str`) are feature strings.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub(crate) enum Cue {
        Eta => "eta",
        Arrival => "arrival",
        Departure => "departure",
        Temperature => "temperature",
        Po => "po",
        Appointment => "appointment",
        Address => "address",
        Confusion => "confusion",
        Ack => "ack",
        OptOut => "opt_out",
        WrongNumber => "wrong_number",
        Problem => "problem",
        Greeting => "greeting",
        Paperwork => "paperwork",
        Money => "money",
        Amenity => "amenity",
        Request => "request",
        Call => "call",
        Question => "question",
    }
}

impl Cue {
    const COUNT: usize = Cue::ALL.len();
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
            "been here",
            "been sitting",
            "sitting here",
            "waiting here",
            "waiting at",
            "still waiting",
            "no door yet",
            "waiting on a door",
            "waiting for a door",
            "checked in at",
            "here at",
            "im at",
            "at the shipper",
            "at the receiver",
            "at the consignee",
            "at the rcvr",
            "at the shpr",
            "en el shipper",
            "en el receiver",
            "en la bodega",
            "en el almacen",
            "afuera del",
            "aqui en",
            "ya llegamos",
            "acabo de llegar",
            "estoy esperando",
            "esperando puerta",
            "esperando que",
            "llevo",
            "on location",
            "in the yard",
            "at the gate",
            "at the guard shack",
            "in the door",
            "at door",
            "bumped",
            "docked",
            "in a door",
            "got a door",
            "arrive*",
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
            "pulled out",
            "just left",
            "leaving now",
            "headed to",
            "heading to",
            "on the way to",
            "rolling to",
            "loaded up",
            "got loaded",
            "all loaded",
            "empty now",
            "im empty",
            "got unloaded",
            "unloaded and",
            "just unloaded",
            "got empty",
            "ya sali",
            "ya saliendo",
            "ya cargue",
            "ya cargado",
            "ya descargue",
            "ya me descargaron",
            "me cargaron",
            "vamos saliendo",
            "voy saliendo",
            "saliendo del",
            "rumbo a",
            "en ruta",
            "sealed",
            "seal number",
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
            "what is this about",
            "what is this for",
            "who is this",
            "what do u mean",
            "what u mean",
            "dont know what",
            "no idea what",
            "que es esto",
            "de que se trata",
            "no entendi",
            "no comprendo",
            "como que",
            "que cosa",
            "what ask",
            "what question",
            "what are you asking",
            "not sure what you",
            "i dont follow",
            "lost me",
            "what now",
            "what load are",
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
            "quit textin",
            "quit txting",
            "stop txting",
            "stop textin",
            "blowing up my phone",
            "blowin up my phone",
            "stop blowing",
            "knock it off",
            "cut it out",
            "enough with",
            "no more",
            "off your list",
            "off the list",
            "off this list",
            "off your texts",
            "take this number",
            "take my number",
            "stop emailing",
            "no more emails",
            "stop the texts",
            "stop these",
            "stop all",
            "desuscribir",
            "desuscribeme",
            "darme de baja",
            "^baja",
            "bajenme",
            "no me sigan",
            "deja de",
            "no molesten",
            "ya basta",
            "^para",
            "no me escriba",
            "no me mande",
            "no consent",
            "do not consent",
            "harass*",
            "block",
            "blocking",
            "lawyer",
            "tcpa",
            "dont want these",
            "dont want any",
            "no quiero recibir",
            "no mas mensajes",
            "no mas textos",
            "ya no me manden",
            "ya no me escriban",
            "stop sms",
            "no sms",
            "stop spamming",
            "spam",
            "quit it",
            "stop it",
            "unsubscribed",
            "remove us",
            "remove our",
            "dont need these",
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
            "no longer",
            "not with",
            "left the company",
            "left that company",
            "quit that",
            "retired",
            "sold my truck",
            "sold the truck",
            "new job",
            "old number",
            "old phone",
            "new phone",
            "not mine",
            "my number now",
            "nobody named",
            "no one named",
            "no one by",
            "nobody by",
            "dont know a",
            "dont know any",
            "idk who",
            "got the wrong",
            "have the wrong",
            "got wrong",
            "ya no trabajo",
            "ya no manejo",
            "ya no estoy con",
            "ya no labora",
            "ya no trabaja",
            "renuncie",
            "me sali de",
            "ya no pertenece",
            "numero nuevo",
            "no es mi",
            "no se quien",
            "se equivocaron",
            "equivocada",
            "persona equivocada",
            "no soy el",
            "no soy la",
            "personal cell",
            "not the dispatcher",
            "not dispatch",
            "dont work for",
            "doesnt work",
            "no longer works",
            "not employed",
            "wrong company",
            "not affiliated",
            "not the right",
            "who is",
            "whos",
            "quien es",
            "quien habla",
            "no conozco a",
            "no trabajo para",
            "no es aqui",
            "no es este",
            "this number belongs",
            "mixed up",
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
            "towing",
            "towed",
            "rear ended",
            "rear-ended",
            "jackknif*",
            "rollover",
            "rolled over",
            "police",
            "cops",
            "trooper",
            "officer",
            "pulled over",
            "hospital",
            "ambulance",
            "fire",
            "smoke",
            "smoking",
            "overheat*",
            "coolant",
            "battery",
            "transmission",
            "turbo",
            "fuel pump",
            "air line",
            "airline",
            "check engine",
            "derate",
            "limp mode",
            "out of order",
            "not working",
            "stopped working",
            "wont turn on",
            "error code",
            "code",
            "sensor",
            "robbed",
            "theft",
            "thief",
            "broken into",
            "migra",
            "policia",
            "aduana",
            "garita",
            "reten",
            "detenido",
            "detuvieron",
            "revision",
            "taller",
            "descompues*",
            "se descompuso",
            "se me descompuso",
            "se rompio",
            "rompio",
            "chocaron",
            "me chocaron",
            "volco",
            "robaron",
            "robo",
            "incendio",
            "humo",
            "se calienta",
            "calentando",
            "no jala",
            "no funciona",
            "descompostura",
            "herido",
            "lastimado",
            "held up",
            "holding the truck",
            "oos",
            "shut down",
            "closed the road",
            "road is closed",
            "highway closed",
            "interstate closed",
            "no way through",
            "cant get through",
            "cant get thru",
            "refused",
            "rejected",
            "wont accept",
            "not accepting",
            "shortage",
            "overage",
            "crushed",
            "leaning",
            "spilled",
            "spill",
            "contaminated",
            "hail",
            "flood*",
            "tornado",
            "blizzard",
            "whiteout",
            "avalanche",
            "landslide",
            "derrumbe",
            "inundacion",
            "tormenta",
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

/// The words of a message as the phrase matchers read them: the texts of its tokens without the
/// sentence marks `.` and `!`. Built once per message and read by both the cue lexicon and the
/// stop-request guard ([`crate::guard`]), which also reads past commas ([`Gaps::Commas`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Words<'a> {
    texts: Vec<&'a str>,
}

/// What may stand between the words of a phrase, and between a phrase and the words around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gaps {
    /// Nothing: every word counts (the cue lexicon).
    None,
    /// Commas: "stop, texting" reads as "stop texting" (the stop-request guard).
    Commas,
}

impl<'a> Words<'a> {
    pub(crate) fn of(toks: &[Tok<'a>]) -> Self {
        let texts = toks
            .iter()
            .filter(|t| !(t.kind == TokKind::Sym && matches!(t.text, "." | "!")))
            .map(|t| t.text)
            .collect();
        Words { texts }
    }

    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }

    pub(crate) fn get(&self, at: usize) -> Option<&'a str> {
        self.texts.get(at).copied()
    }

    /// Whether `gaps` passes over the word at `at` (only commas, which lex as symbols alone).
    fn skipped(&self, at: usize, gaps: Gaps) -> bool {
        gaps == Gaps::Commas && self.texts[at] == ","
    }

    /// The first word at or after `from` that `gaps` does not pass over.
    pub(crate) fn next_from(&self, from: usize, gaps: Gaps) -> Option<usize> {
        (from..self.texts.len()).find(|&at| !self.skipped(at, gaps))
    }

    /// Whether one of the `n` words before `at` (counted as `gaps` reads them) negates what
    /// follows ("still not loaded", "I never said stop texting").
    pub(crate) fn negated_before(&self, at: usize, n: usize, gaps: Gaps) -> bool {
        match gaps {
            Gaps::None => self.texts[at.saturating_sub(n)..at].iter().any(|t| NEGATORS.contains(t)),
            Gaps::Commas => (0..at)
                .rev()
                .filter(|&i| !self.skipped(i, gaps))
                .take(n)
                .any(|i| NEGATORS.contains(&self.texts[i])),
        }
    }
}

/// One phrase of a [`PhraseIndex`], split once.
struct Phrase<T> {
    value: T,
    /// Words after the first.
    rest: Vec<&'static str>,
    /// Matches only at the first word.
    anchored: bool,
}

/// Phrases of normalized words indexed by their first word, built once: matching a message
/// costs one hash lookup per word instead of a scan of every phrase. The cue lexicon and the
/// stop-request guard each build one; `T` is what a phrase stands for.
pub(crate) struct PhraseIndex<T> {
    by_first: HashMap<&'static str, Vec<Phrase<T>>>,
}

impl<T> PhraseIndex<T> {
    pub(crate) fn new() -> Self {
        PhraseIndex { by_first: HashMap::new() }
    }

    /// Adds `phrase` (words separated by single spaces; a leading `^` anchors it at the first
    /// word of a message).
    pub(crate) fn insert(&mut self, phrase: &'static str, value: T) {
        let (anchored, phrase) = match phrase.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, phrase),
        };
        let mut words = phrase.split(' ');
        let first = words.next().unwrap_or_default();
        let rest = words.collect();
        self.by_first.entry(first).or_default().push(Phrase { value, rest, anchored });
    }

    /// The phrases that begin at word `at` of `words`, each with the position of its last word.
    pub(crate) fn matches_at<'s>(
        &'s self,
        words: &'s Words<'_>,
        at: usize,
        gaps: Gaps,
    ) -> impl Iterator<Item = (&'s T, usize)> + 's {
        let candidates = words.get(at).and_then(|first| self.by_first.get(first));
        candidates.into_iter().flatten().filter_map(move |p| {
            if p.anchored && at != 0 {
                return None;
            }
            let last = match gaps {
                Gaps::None => {
                    let end = at + 1 + p.rest.len();
                    (words.texts.get(at + 1..end)? == p.rest.as_slice()).then_some(end - 1)?
                }
                Gaps::Commas => {
                    let mut last = at;
                    for &word in &p.rest {
                        last = words.next_from(last + 1, gaps)?;
                        if words.texts[last] != word {
                            return None;
                        }
                    }
                    last
                }
            };
            Some((&p.value, last))
        })
    }
}

/// The lexicon compiled once: its phrases by first word, and its prefix patterns.
struct Compiled {
    phrases: PhraseIndex<Cue>,
    /// Single-word prefix patterns (`damag*`), checked against every word.
    prefixes: Vec<(Cue, &'static str)>,
}

fn compiled() -> &'static Compiled {
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    COMPILED.get_or_init(|| {
        let mut phrases = PhraseIndex::new();
        let mut prefixes = Vec::new();
        for &(cue, patterns) in LEXICON {
            for &pattern in patterns {
                // A single word ending in `*` matches by prefix, anchored or not.
                let unanchored = pattern.strip_prefix('^').unwrap_or(pattern);
                match unanchored.strip_suffix('*') {
                    Some(prefix) if !unanchored.contains(' ') => prefixes.push((cue, prefix)),
                    _ => phrases.insert(pattern, cue),
                }
            }
        }
        Compiled { phrases, prefixes }
    })
}

/// The cue families present in the words, each once, in [`Cue`] order.
pub(crate) fn cues_in(words: &Words<'_>) -> Vec<CueHit> {
    let lexicon = compiled();
    // First match position per cue family.
    let mut first: [Option<usize>; Cue::COUNT] = [None; Cue::COUNT];
    let mut record = |cue: Cue, at: usize| {
        let slot = &mut first[cue as usize];
        if slot.is_none_or(|prev| at < prev) {
            *slot = Some(at);
        }
    };
    for (i, text) in words.texts.iter().enumerate() {
        for (&cue, _) in lexicon.phrases.matches_at(words, i, Gaps::None) {
            record(cue, i);
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
            Some(CueHit { cue, at_start: at < 2, negated: words.negated_before(at, 3, Gaps::None) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{lex, normalize};

    fn cues(s: &str) -> Vec<Cue> {
        let n = normalize(s);
        cues_in(&Words::of(&lex(&n))).into_iter().map(|h| h.cue).collect()
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
        let hits = cues_in(&Words::of(&lex(&n)));
        assert!(hits.iter().any(|h| h.cue == Cue::Ack && !h.at_start));
    }
}
