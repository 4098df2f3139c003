//! SOPs are data: the shipped specs load, a malformed file is refused naming the file, the field
//! and what is wrong, and every version is kept.

use load_agent_agent::{SopRegistry, Templates, parse_sop};

const GOOD: &str = r#"
id: client_c
version: 1
asks:
  eta_request:
    on: {trigger: delay_risk_changed, to: high}
    target: {role: driver, channel: sms}
    question: eta_request
    max_attempts: 2
    retry_after_minutes: 30
"#;

fn templates() -> Templates {
    Templates::embedded().expect("templates")
}

#[test]
fn the_shipped_sops_load() {
    let reg = SopRegistry::embedded(&templates()).expect("shipped SOPs are valid");
    assert_eq!(reg.latest("client_a").map(|s| s.spec.version), Some(1));
    assert_eq!(reg.get("client_b", 1).map(|s| s.spec.asks.len()), Some(2));
}

#[test]
fn errors_name_the_file_the_field_and_the_problem() {
    let t = templates();
    let cases = [
        (
            GOOD.replace("max_attempts: 2", "max_attempts: 0"),
            "asks.eta_request.max_attempts",
            "between 1 and 10",
        ),
        (GOOD.replace("role: driver", "role: pilot"), "asks.eta_request.target.role", "unknown role"),
        (
            GOOD.replace("question: eta_request", "question: nope"),
            "asks.eta_request.question",
            "unknown template",
        ),
        (GOOD.replace("to: high", "to: severe"), "asks.eta_request.on.to", "unknown delay risk band"),
        (
            GOOD.replace("max_attempts: 2", "max_attempts: 2\n    retries: 4"),
            "asks.eta_request",
            "unknown field",
        ),
        (
            GOOD.replace("max_attempts: 2", "max_attempts: two"),
            "asks.eta_request.max_attempts",
            "invalid type",
        ),
    ];
    for (text, field, problem) in cases {
        let err = parse_sop("sops/client_c/v1.yaml", &text, &t).expect_err("refused");
        assert_eq!(err.file, "sops/client_c/v1.yaml");
        assert!(err.field.starts_with(field), "field {:?} for {text}", err.field);
        assert!(err.problem.contains(problem), "problem {:?}", err.problem);
    }
}

#[test]
fn every_version_is_kept_and_the_newest_is_what_new_loads_get() {
    let t = templates();
    let mut reg = SopRegistry::default();
    reg.insert("v1", parse_sop("v1", GOOD, &t).expect("v1")).expect("insert v1");
    let v2 = GOOD
        .replace("version: 1", "version: 2")
        .replace("retry_after_minutes: 30", "retry_after_minutes: 10");
    reg.insert("v2", parse_sop("v2", &v2, &t).expect("v2")).expect("insert v2");
    assert_eq!(reg.latest("client_c").map(|s| s.spec.version), Some(2));
    let v1 = reg.get("client_c", 1).and_then(|s| s.ask_rule("eta_request")).map(|r| r.retry_after_minutes);
    assert_eq!(v1, Some(30), "loads pinned to v1 keep v1");
    let dup = reg.insert("again", parse_sop("again", GOOD, &t).expect("v1")).expect_err("defined twice");
    assert_eq!(dup.field, "version");
}

#[test]
fn a_folder_of_sops_loads_and_a_bad_one_names_its_path() {
    let dir = std::env::temp_dir().join(format!("la-sops-{}", std::process::id()));
    let client = dir.join("client_c");
    std::fs::create_dir_all(&client).expect("tmp");
    std::fs::write(client.join("v1.yaml"), GOOD).expect("write");
    assert!(SopRegistry::load_dir(&dir, &templates()).expect("loads").get("client_c", 1).is_some());
    std::fs::write(
        client.join("v2.yaml"),
        GOOD.replace("version: 1", "version: 2").replace("channel: sms", "channel: fax"),
    )
    .expect("write");
    let err = SopRegistry::load_dir(&dir, &templates()).expect_err("refused");
    assert!(
        err.file.ends_with("client_c/v2.yaml") && err.field == "asks.eta_request.target.channel",
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

const STAGE_RULE: &str = r#"
id: client_c
version: 1
forbidden_roles: [shipper]
asks:
  reefer_temp:
    on: {trigger: stage_entered, stage: to_delivery, after_departing: pickup, requires_reefer: true}
    target: {role: driver, channel: sms}
    question: eta_request
    max_attempts: 2
    retry_after_minutes: 30
    escalation:
      - {action: send_email, role: carrier_dispatcher, thread: new, template: eta_escalation_email}
"#;

/// The spec is typed when the file is loaded: every spelled value is parsed with the domain's
/// enums, so a misspelling is refused naming the file and the field, never met by the executor.
#[test]
fn a_misspelled_value_is_refused_at_load_naming_the_file_and_the_field() {
    use load_agent_agent::sop::{AskTrigger, EscalationStep};
    use load_agent_domain::{EmailThread, Role, Stage, StopKind};

    let t = templates();
    let sop = parse_sop("sops/client_c/v1.yaml", STAGE_RULE, &t).expect("valid");
    assert_eq!(sop.spec.forbidden_roles, [Role::Shipper]);
    let rule = sop.ask_rule("reefer_temp").expect("rule");
    assert_eq!(
        rule.on,
        AskTrigger::StageEntered {
            stage: Stage::ToDelivery,
            after_departing: Some(StopKind::Pickup),
            requires_reefer: true
        }
    );
    assert!(matches!(
        rule.escalation[..],
        [EscalationStep::SendEmail { role: Role::CarrierDispatcher, thread: EmailThread::New, .. }]
    ));

    let cases = [
        (
            "stage: to_delivery",
            "stage: to_delivry",
            "asks.reefer_temp.on.stage",
            "unknown stage \"to_delivry\"",
        ),
        (
            "after_departing: pickup",
            "after_departing: pick_up",
            "asks.reefer_temp.on.after_departing",
            "unknown stop kind",
        ),
        ("[shipper]", "[shiper]", "forbidden_roles[0]", "unknown role \"shiper\""),
        ("thread: new", "thread: old", "asks.reefer_temp.escalation[0].thread", "unknown thread"),
        (
            "role: carrier_dispatcher",
            "role: dispatcher",
            "asks.reefer_temp.escalation[0].role",
            "unknown role",
        ),
        ("channel: sms", "channel: slack", "asks.reefer_temp.target.channel", "unsupported channel"),
        ("action: send_email", "action: send_mail", "asks.reefer_temp", "unknown variant `send_mail`"),
        (
            "trigger: stage_entered",
            "trigger: stage_enterd",
            "asks.reefer_temp.on",
            "unknown variant `stage_enterd`",
        ),
    ];
    for (good, bad, field, problem) in cases {
        let text = STAGE_RULE.replace(good, bad);
        let err = parse_sop("sops/client_c/v1.yaml", &text, &t).expect_err(bad);
        assert_eq!(err.file, "sops/client_c/v1.yaml");
        assert!(err.field.starts_with(field), "field {:?} for {bad}", err.field);
        assert!(err.problem.contains(problem), "problem {:?} for {bad}", err.problem);
    }
}
