//! The token rule shared by the HTTP surface (`http`, its `Authorization: Bearer` check) and
//! the operations console (`console`, its `/login` and the cookie that stands for the token):
//! comparing a given token in constant time, and the console cookie (its name, its value, a
//! digest of the token, and finding it among a request's cookies). Neither `http` nor `console`
//! is imported here, so both import this and not each other's internals.

use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The cookie `/login` sets.
pub const COOKIE: &str = "load_agent_console";

/// Whether `given` is `token`, in time that does not depend on where they differ (a length
/// mismatch answers at once: the length of the token is not the secret).
pub fn token_matches(given: &str, token: &str) -> bool {
    given.as_bytes().ct_eq(token.as_bytes()).into()
}

/// The cookie value that stands for `token`: a digest, so the cookie never holds the token.
pub fn cookie_value(token: &str) -> String {
    let digest =
        Sha256::new().chain_update(b"load-agent console v1\0").chain_update(token.as_bytes()).finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The console cookie of a request, if any.
pub fn cookie_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(name, value)| (name == COOKIE).then_some(value))
}

/// Whether a request's console cookie stands for `token`.
pub fn cookie_matches(headers: &HeaderMap, token: &str) -> bool {
    cookie_of(headers).is_some_and(|c| token_matches(c, &cookie_value(token)))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn the_cookie_is_a_digest_of_the_token_and_is_found_among_others() {
        let v = cookie_value("secret-token");
        assert_eq!(v.len(), 64);
        assert!(!v.contains("secret"));
        assert_ne!(v, cookie_value("other-token"));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=1; {COOKIE}={v}; b=2")).expect("header"),
        );
        assert_eq!(cookie_of(&headers), Some(v.as_str()));
        assert_eq!(cookie_of(&HeaderMap::new()), None);
        assert!(cookie_matches(&headers, "secret-token"));
        assert!(!cookie_matches(&headers, "other-token"));
    }

    #[test]
    fn a_token_matches_only_itself() {
        assert!(token_matches("s3cret", "s3cret"));
        for other in ["s3creT", "s3cre", "s3crets", "", "x3cret"] {
            assert!(!token_matches(other, "s3cret"), "{other}");
        }
        assert!(token_matches("", ""));
    }
}
