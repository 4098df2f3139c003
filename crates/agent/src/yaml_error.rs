//! Turning a serde error into the `field` / `problem` pair that SOP and template errors report.
//! Its own module because both `sop` and `templates` need it, and `sop` already uses
//! `templates` (so the helper living in `sop` made the two import each other).

/// serde_yaml reports `path.to.field: problem at line L column C`; split the field path off.
pub(crate) fn split_yaml_error(msg: &str) -> (String, String) {
    let msg = match msg.find(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    };
    match msg.split_once(": ") {
        Some((field, problem)) if !field.contains(' ') => (field.to_string(), problem.to_string()),
        _ => ("(document)".to_string(), msg.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_path_is_split_off_and_the_location_dropped() {
        assert_eq!(
            split_yaml_error(
                "asks.eta_request.max_attempts: invalid type: string \"two\" at line 7 column 19"
            ),
            ("asks.eta_request.max_attempts".into(), "invalid type: string \"two\"".into())
        );
        assert_eq!(
            split_yaml_error("missing field `id` at line 1 column 1"),
            ("(document)".into(), "missing field `id`".into())
        );
    }
}
