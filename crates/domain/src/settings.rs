//! What every crate's settings share (each crate owns its section of the configuration, the
//! binary composes them): [`Secret`], a value that never prints; [`mask_url_password`] for URLs
//! that may carry one; [`SettingError`], a setting that is missing or wrong, by name.
//! Pure: no IO, no environment read.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

/// A secret value: `Debug`, `Display` and serialization print `***`. Read from text, or from a
/// TOML integer or boolean (`token = 12345` is the text `12345`); a configuration error about it
/// never quotes it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SettingText { what: "a secret" }).map(Secret)
    }
}

/// Reads a setting held as text from text, a whole number or a boolean (TOML `n = 2048`, or an
/// environment variable of digits, which the configuration reads as a number, is the text
/// `"2048"`); nothing is the empty text. A float is refused without quoting it (serde's own
/// message would), since the value may be a secret.
struct SettingText {
    /// What the setting is, for the messages ("a secret").
    what: &'static str,
}

impl serde::de::Visitor<'_> for SettingText {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} as text", self.what)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_char<E: serde::de::Error>(self, v: char) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<String, E> {
        Err(E::custom(format!("{} must be text (quote it); the value is not shown", self.what)))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<String, E> {
        Ok(String::new())
    }
}

/// A setting held as text that may also be written as a whole number (or a boolean): the same
/// reading as a [`Secret`]'s ([`SettingText`]), for `#[serde(deserialize_with = ...)]` on a
/// plain `String` (`max_output_tokens = 2048` is `"2048"`; the crate that uses it checks it).
pub fn text_or_integer<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    d.deserialize_any(SettingText { what: "this setting" })
}

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The value, for the one place that must use it (a client constructor).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "\"\"" } else { "***" })
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "" } else { "***" })
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if self.0.is_empty() { "" } else { "***" })
    }
}

/// `scheme://user:password@host/db?password=x&sslpassword=y` →
/// `scheme://user:***@host/db?password=***&sslpassword=***`. The user information ends at the
/// last `@`, so a password holding an unescaped `@`, `/` or `?` is masked whole (a URL this
/// cannot parse is masked more, never less).
pub fn mask_url_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let mut out = format!("{scheme}://");
    let after_userinfo = match rest.rsplit_once('@') {
        Some((userinfo, after)) => {
            match userinfo.split_once(':') {
                Some((user, _)) => out.push_str(&format!("{user}:***@")),
                None => out.push_str(&format!("{userinfo}@")),
            }
            after
        }
        None => rest,
    };
    let (host_path, query) = match after_userinfo.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (after_userinfo, None),
    };
    out.push_str(host_path);
    if let Some(query) = query {
        out.push('?');
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.to_ascii_lowercase().contains("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}

/// A URL setting held as text, printed with its password masked.
pub fn serialize_masked_url<S: Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&mask_url_password(url))
}

/// A setting that is missing or wrong, by name (`relay.lease_secs`); the problem never quotes a
/// secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("configuration: {setting}: {problem}")]
pub struct SettingError {
    pub setting: String,
    pub problem: String,
}

impl SettingError {
    pub fn new(setting: impl Into<String>, problem: impl Into<String>) -> Self {
        SettingError { setting: setting.into(), problem: problem.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints() {
        let s = Secret::new("hunter2");
        assert_eq!((format!("{s:?}"), s.to_string()), ("***".to_string(), "***".to_string()));
        assert_eq!(serde_json::to_string(&s).expect("serializes"), "\"***\"");
        assert_eq!(s.expose(), "hunter2");
        let empty = Secret::default();
        assert_eq!((format!("{empty:?}"), empty.to_string()), ("\"\"".to_string(), String::new()));
        assert_eq!(serde_json::to_string(&empty).expect("serializes"), "\"\"");
    }

    #[test]
    fn a_secret_is_read_as_text_and_a_float_is_refused_unquoted() {
        let s: Secret = serde_json::from_str("73191").expect("an integer is its text");
        assert_eq!(s.expose(), "73191");
        let s: Secret = serde_json::from_str("true").expect("a boolean is its text");
        assert_eq!(s.expose(), "true");
        let e = serde_json::from_str::<Secret>("7319.25").expect_err("a float");
        assert!(!e.to_string().contains("7319"), "{e}");
    }

    #[test]
    fn a_text_setting_takes_a_whole_number_as_its_text() {
        #[derive(Deserialize)]
        struct S {
            #[serde(deserialize_with = "text_or_integer")]
            n: String,
        }
        let read = |json: &str| serde_json::from_str::<S>(json).map(|s| s.n);
        assert_eq!(read(r#"{"n": 2048}"#).expect("an integer"), "2048");
        assert_eq!(read(r#"{"n": "2048"}"#).expect("text"), "2048");
        assert!(read(r#"{"n": 1.5}"#).is_err(), "a float is refused");
    }

    #[test]
    fn url_passwords_are_masked() {
        assert_eq!(
            mask_url_password("postgres://app:pw@db/la?sslpassword=k"),
            "postgres://app:***@db/la?sslpassword=***"
        );
        assert_eq!(mask_url_password("not a url"), "not a url");
        assert_eq!(SettingError::new("a.b", "wrong").to_string(), "configuration: a.b: wrong");
    }
}
