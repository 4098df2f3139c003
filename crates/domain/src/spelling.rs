//! One spelling per enum: [`spelled_enum!`] declares a fieldless enum from one list of
//! `Variant => "spelling"` pairs and derives everything that spells it, so a spelling is written
//! once and the stored formats, Avro symbols, HTTP bodies and metric labels cannot drift apart.
//!
//! A plain `macro_rules!` macro rather than a derive crate (strum): the domain crate stays free
//! of dependencies beyond serde and thiserror.

/// A string that is none of an enum's spellings: names the value and the allowed ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?} (expected one of: {})", .allowed.join(", "))]
pub struct UnknownSpelling {
    /// What was being parsed (the enum's name, e.g. `Stage`).
    pub what: &'static str,
    /// The value given.
    pub value: String,
    /// Every spelling the enum accepts, in declaration order.
    pub allowed: &'static [&'static str],
}

/// Declares a fieldless enum together with its one spelling per variant.
///
/// ```
/// load_agent_domain::spelled_enum! {
///     /// A traffic light.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Light {
///         Red => "red",
///         /// Older logs wrote `amber`; it still parses (an alias never printed).
///         Yellow => "yellow" | "amber",
///         Green => "green",
///     }
/// }
/// assert_eq!(Light::Yellow.as_str(), "yellow");
/// assert_eq!(Light::parse("amber"), Some(Light::Yellow));
/// assert_eq!("green".parse::<Light>(), Ok(Light::Green));
/// assert_eq!(Light::ALL, [Light::Red, Light::Yellow, Light::Green]);
/// assert_eq!(Light::SPELLINGS, ["red", "yellow", "green"]);
/// assert_eq!(Light::Red.to_string(), "red");
/// let err = "blue".parse::<Light>().unwrap_err();
/// assert_eq!(err.to_string(), r#"unknown Light "blue" (expected one of: red, yellow, green)"#);
/// ```
///
/// Generates, on the enum:
/// - `ALL: [Self; N]`, every variant in declaration order;
/// - `SPELLINGS: [&str; N]`, their spellings in the same order;
/// - `const fn as_str(self) -> &'static str`;
/// - `fn parse(&str) -> Option<Self>` (exact match on a spelling or an alias);
/// - `FromStr` with [`UnknownSpelling`] as its error, naming the value and the spellings;
/// - `Display`, which writes the spelling.
///
/// An enum whose `FromStr` is its own (it normalizes the input first, or errs with a type of its
/// own that users see) starts with `own FromStr;`: everything above but `FromStr`.
///
/// Attributes (docs, derives, `#[serde(...)]`, `#[default]`) pass through to the enum and its
/// variants. When the enum also derives serde with `rename_all`, test that both agree over
/// `ALL` (serde is what the JSON formats use; `as_str` what SQL, Avro and metrics use).
#[macro_export]
macro_rules! spelled_enum {
    // `own FromStr;` first: everything but `FromStr`, which the enum implements itself (a parse
    // that normalizes its input, or an error type of its own), usually through `parse`.
    (
        own FromStr;
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident => $spelling:literal $(| $alias:literal)*
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant,
            )+
        }

        #[allow(dead_code)]
        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [$name; [$($spelling),+].len()] = [$($name::$variant),+];

            /// The spelling of every variant, in the order of `ALL`.
            pub const SPELLINGS: [&'static str; [$($spelling),+].len()] = [$($spelling),+];

            /// The variant's one spelling (stored formats, Avro symbols, metric labels).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $spelling,)+
                }
            }

            /// The variant spelled `s` (or one of its aliases), if any.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($spelling $(| $alias)* => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident => $spelling:literal $(| $alias:literal)*
            ),+ $(,)?
        }
    ) => {
        $crate::spelled_enum! {
            own FromStr;
            $(#[$meta])*
            $vis enum $name {
                $(
                    $(#[$vmeta])*
                    $variant => $spelling $(| $alias)*
                ),+
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::spelling::UnknownSpelling;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::parse(s).ok_or_else(|| $crate::spelling::UnknownSpelling {
                    what: stringify!($name),
                    value: s.to_owned(),
                    allowed: &$name::SPELLINGS,
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::spelled_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        enum Sample {
            #[default]
            One => "one",
            TwoWords => "two_words" | "two",
        }
    }

    crate::spelled_enum! {
        own FromStr;
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Loose {
            Up => "up",
            Down => "down",
        }
    }

    impl std::str::FromStr for Loose {
        type Err = String;

        fn from_str(s: &str) -> Result<Self, String> {
            Loose::parse(&s.trim().to_ascii_lowercase()).ok_or_else(|| format!("not a direction: {s}"))
        }
    }

    #[test]
    fn an_enum_with_its_own_from_str_keeps_the_rest() {
        assert_eq!(" UP ".parse::<Loose>(), Ok(Loose::Up));
        assert_eq!("left".parse::<Loose>(), Err("not a direction: left".to_owned()));
        assert_eq!(Loose::SPELLINGS, ["up", "down"]);
        assert_eq!(Loose::Down.to_string(), "down");
    }

    #[test]
    fn spellings_round_trip_and_aliases_only_parse() {
        for v in Sample::ALL {
            assert_eq!(Sample::parse(v.as_str()), Some(v));
            assert_eq!(v.to_string(), v.as_str());
        }
        assert_eq!(Sample::parse("two"), Some(Sample::TwoWords));
        assert_eq!(Sample::SPELLINGS, ["one", "two_words"]);
        assert_eq!(Sample::default(), Sample::One);
    }

    #[test]
    fn a_bad_value_names_itself_and_the_allowed_ones() {
        let err = "three".parse::<Sample>().expect_err("not a spelling");
        assert_eq!(err.value, "three");
        assert_eq!(err.to_string(), r#"unknown Sample "three" (expected one of: one, two_words)"#);
    }

    /// The domain's spelled enums that also derive serde: the JSON formats (serde) and SQL, Avro
    /// and metric labels (`as_str`) must spell every variant alike.
    #[test]
    fn serde_and_as_str_agree_for_every_domain_enum() {
        fn agree<T>(all: &[T], as_str: fn(T) -> &'static str)
        where
            T: Copy + PartialEq + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
        {
            for &v in all {
                let spelled = as_str(v);
                assert_eq!(serde_json::to_value(v).ok(), Some(serde_json::json!(spelled)), "{v:?}");
                assert_eq!(serde_json::from_value::<T>(serde_json::json!(spelled)).ok(), Some(v), "{v:?}");
            }
        }
        macro_rules! check {
            ($($t:ty),+ $(,)?) => {$(
                agree(&<$t>::ALL, <$t>::as_str);
            )+};
        }
        use crate::*;
        check!(
            ActionKind,
            Destination,
            DecisionPath,
            DocumentType,
            EmailThread,
            Language,
            MessageChannel,
            OutcomeStatus,
            RiskBand,
            Role,
            Stage,
            StepKind,
            StopKind,
            StopStatusKind,
        );
    }
}
