//! The security guarantees of the binary (docs/security.md), checked on what the process prints:
//!
//! - secrets (the Kafka SASL password, the LLM API key, the HTTP token, the password of the
//!   database URL) appear nowhere in stdout or stderr: `config --print`, the startup and request
//!   logs at `trace`, and the error paths that name the database URL;
//! - the HTTP endpoints bind to loopback by default and require the bearer token otherwise;
//! - phone numbers, email addresses and message text are redacted in the logs unless
//!   `log.debug_pii` is true (run both ways, so the check can fail).
//!
//! Needs the Postgres server of `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`,
//! started by `./scripts/test.sh`) for the startup test; the others use SQLite.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use load_agent_domain::{Contact, EventKind, InboundEvent, Language, LoadRegistered, Role, Stop, StopKind};

const BIN: &str = env!("CARGO_BIN_EXE_load-agent");

const SASL_PASSWORD: &str = "kafka-sasl-secret-9Qx2w";
const API_KEY: &str = "sk-llm-secret-7Hp4z";
const HTTP_TOKEN: &str = "http-token-secret-3Kd8r";
const DB_PASSWORD: &str = "db-password-secret-5Mv1k";
const REGISTRY_PASSWORD: &str = "registry-secret-2Lb6";

const PHONE: &str = "+13125550147";
const EMAIL: &str = "dana.secure@carrier.example";
const INBOUND_TEXT: &str = "hey what time is my appt at the receiver";
/// A sender who is not a contact of the load: the Hero task about it quotes the number.
const UNKNOWN_PHONE: &str = "+13125550188";
const UNKNOWN_TEXT: &str = "is this load still available or not";

/// A directory of its own under the system's temporary directory, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("load-agent-security-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `load-agent` command with no inherited `LOAD_AGENT_*` or `RUST_LOG`, run in `dir`.
fn load_agent(dir: &std::path::Path) -> Command {
    let mut c = Command::new(BIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("LOAD_AGENT_") || k == "RUST_LOG" {
            c.env_remove(k);
        }
    }
    c.current_dir(dir).env("NO_COLOR", "1").stdin(Stdio::null());
    c
}

fn text_of(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn assert_no_secret(what: &str, printed: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(!printed.contains(s), "{what}: the secret {s:?} was printed:\n{printed}");
    }
}

/// Every secret setting set, with a Postgres `url` for `database.url`.
fn secret_env(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("LOAD_AGENT_DATABASE_URL", url.to_owned()),
        ("LOAD_AGENT_KAFKA_SECURITY_PROTOCOL", "SASL_SSL".into()),
        ("LOAD_AGENT_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512".into()),
        ("LOAD_AGENT_KAFKA_SASL_USERNAME", "load-agent".into()),
        ("LOAD_AGENT_KAFKA_SASL_PASSWORD", SASL_PASSWORD.into()),
        ("LOAD_AGENT_KAFKA_SSL_CA_LOCATION", "/etc/ssl/certs/ca-certificates.crt".into()),
        ("LOAD_AGENT_KAFKA_SCHEMA_REGISTRY_URL", format!("https://registry:{REGISTRY_PASSWORD}@127.0.0.1:9")),
        ("LOAD_AGENT_LLM_PROVIDER", "local+openai".into()),
        ("LOAD_AGENT_LLM_OPENAI_BASE_URL", "http://127.0.0.1:9/v1".into()),
        ("LOAD_AGENT_LLM_OPENAI_MODEL", "test-model".into()),
        ("LOAD_AGENT_LLM_OPENAI_API_KEY", API_KEY.into()),
        ("LOAD_AGENT_HTTP_TOKEN", HTTP_TOKEN.into()),
    ]
}

const SECRETS: &[&str] = &[SASL_PASSWORD, API_KEY, HTTP_TOKEN, DB_PASSWORD, REGISTRY_PASSWORD];

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a port")
}

/// One HTTP/1.1 request; the status and the whole response.
fn http(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Option<(u16, String)> {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().ok()?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.unwrap_or("");
    req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let status = resp.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, resp))
}

/// A running `load-agent serve` whose stdout and stderr are collected.
struct Serve {
    child: Child,
    port: u16,
    output: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Serve {
    fn start(dir: &std::path::Path, env: &[(&str, String)]) -> Serve {
        let port = free_port();
        let mut cmd = load_agent(dir);
        cmd.arg("serve")
            .env("LOAD_AGENT_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("LOAD_AGENT_SHUTDOWN_GRACE_SECS", "10")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start load-agent serve");
        let output = Arc::new(Mutex::new(String::new()));
        let mut readers = Vec::new();
        let pipes: Vec<Box<dyn Read + Send>> = vec![
            Box::new(child.stdout.take().expect("stdout")),
            Box::new(child.stderr.take().expect("stderr")),
        ];
        for mut pipe in pipes {
            let output = output.clone();
            readers.push(std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    output.lock().expect("output").push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }));
        }
        let mut serve = Serve { child, port, output, readers };
        let deadline = Instant::now() + Duration::from_secs(90);
        while http(port, "GET", "/healthz", None, None).map(|r| r.0) != Some(200) {
            if let Ok(Some(status)) = serve.child.try_wait() {
                panic!("serve exited early ({status}):\n{}", serve.output());
            }
            assert!(Instant::now() < deadline, "serve did not answer /healthz:\n{}", serve.output());
            std::thread::sleep(Duration::from_millis(100));
        }
        serve
    }

    fn output(&self) -> String {
        self.output.lock().expect("output").clone()
    }

    fn wait_for(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let out = self.output();
            if out.contains(needle) {
                return out;
            }
            assert!(Instant::now() < deadline, "no {needle:?} in the output within {timeout:?}:\n{out}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM, then everything it printed.
    fn stop(mut self) -> String {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.wait();
        for r in std::mem::take(&mut self.readers) {
            let _ = r.join();
        }
        self.output()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn at(offset_minutes: i64) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::minutes(offset_minutes)
}

/// A registration with a driver reachable by `PHONE` and a dispatcher by `EMAIL`, an SMS from
/// the driver's number asking for the receiver's appointment (answered by a template), and an
/// SMS from an unknown number (a Hero task).
fn events(load_id: &str) -> Vec<String> {
    let contact = |id: &str, role, name: &str, phone: Option<&str>, email: Option<&str>| Contact {
        id: id.into(),
        role,
        name: name.into(),
        phone: phone.map(Into::into),
        email: email.map(Into::into),
        slack: None,
        language: Language::En,
    };
    let stop = |sequence, kind, name: &str, hours: i64| Stop {
        sequence,
        kind,
        name: name.into(),
        address: "1 Dock Rd".into(),
        appointment: at(hours * 60).fixed_offset(),
        po_numbers: vec![],
        reference: None,
    };
    let load = LoadRegistered {
        load_id: load_id.into(),
        client: "client_a".into(),
        sop_version: None,
        contacts: vec![
            contact("drv", Role::Driver, "Luis", Some(PHONE), None),
            contact("disp", Role::CarrierDispatcher, "Dana", None, Some(EMAIL)),
        ],
        stops: vec![stop(1, StopKind::Pickup, "Acme DC", 2), stop(2, StopKind::Delivery, "Store 88", 8)],
        reefer: None,
    };
    let registration = InboundEvent {
        event_id: format!("reg-{load_id}"),
        load_id: load_id.into(),
        occurred_at: at(-10),
        kind: EventKind::LoadRegistered { load },
    };
    let sms = InboundEvent {
        event_id: format!("sms-{load_id}"),
        load_id: load_id.into(),
        occurred_at: at(-1),
        kind: EventKind::Sms { from: PHONE.into(), text: INBOUND_TEXT.into() },
    };
    let unknown = InboundEvent {
        event_id: format!("sms2-{load_id}"),
        load_id: load_id.into(),
        occurred_at: at(0),
        kind: EventKind::Sms { from: UNKNOWN_PHONE.into(), text: UNKNOWN_TEXT.into() },
    };
    [registration, sms, unknown].iter().map(|e| serde_json::to_string(e).expect("event JSON")).collect()
}

const DELIVERED: &str = "service delivered";

/// Posts the events, waits for the fake services' delivery lines of the SMS reply and the Hero
/// task, then until no new delivery line comes for two seconds (twenty at most); returns the
/// output.
fn post_and_wait_for_the_sms(serve: &Serve, load_id: &str, token: Option<&str>) -> String {
    for body in events(load_id) {
        let (status, resp) = http(serve.port, "POST", "/events", token, Some(&body)).expect("POST /events");
        assert_eq!(status, 202, "{resp}");
    }
    serve.wait_for("fake sms service delivered", Duration::from_secs(60));
    serve.wait_for("fake hero service delivered", Duration::from_secs(60));
    let deliveries = || serve.output().matches(DELIVERED).count();
    let (started, mut seen, mut quiet_since) = (Instant::now(), deliveries(), Instant::now());
    while quiet_since.elapsed() < Duration::from_secs(2) && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
        if deliveries() != seen {
            seen = deliveries();
            quiet_since = Instant::now();
        }
    }
    serve.output()
}

#[test]
fn config_print_masks_every_secret_and_keeps_http_on_loopback() {
    let dir = TempDir::new();
    let url = format!("postgres://app:{DB_PASSWORD}@db.internal:5432/la?sslmode=verify-full");
    let mut cmd = load_agent(dir.path());
    cmd.args(["config", "--print"]);
    for (k, v) in secret_env(&url) {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run config --print");
    let printed = text_of(&out);
    assert!(out.status.success(), "{printed}");
    assert_no_secret("config --print", &printed, SECRETS);
    assert!(printed.contains("postgres://app:***@db.internal:5432/la?sslmode=verify-full"), "{printed}");
    assert!(printed.contains("sasl_password = \"***\""), "{printed}");
    assert!(printed.contains("openai_api_key = \"***\""), "{printed}");
    assert!(printed.contains("token = \"***\""), "{printed}");
    assert!(printed.contains("https://registry:***@127.0.0.1:9"), "{printed}");

    // The HTTP endpoints: loopback by default; elsewhere only with a token.
    let out = load_agent(dir.path()).args(["config", "--print"]).output().expect("run");
    assert!(text_of(&out).contains("addr = \"127.0.0.1:8080\""), "{}", text_of(&out));
    let out = load_agent(dir.path())
        .arg("config")
        .env("LOAD_AGENT_HTTP_ADDR", "0.0.0.0:8080")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{}", text_of(&out));
    assert!(text_of(&out).contains("http.token"), "{}", text_of(&out));
    let out = load_agent(dir.path())
        .arg("config")
        .env("LOAD_AGENT_HTTP_ADDR", "0.0.0.0:8080")
        .env("LOAD_AGENT_HTTP_TOKEN", HTTP_TOKEN)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", text_of(&out));
    assert_no_secret("config", &text_of(&out), SECRETS);
}

#[test]
fn configuration_errors_never_quote_a_secret() {
    let dir = TempDir::new();
    let cases: Vec<(&str, String)> = vec![
        // Refused: a remote Postgres without TLS.
        ("LOAD_AGENT_DATABASE_URL", format!("postgres://app:{DB_PASSWORD}@db.internal/la")),
        // Refused: not a database URL.
        ("LOAD_AGENT_DATABASE_URL", format!("mysql://app:{DB_PASSWORD}@db.internal/la")),
        // Refused: a SASL password without SASL.
        ("LOAD_AGENT_KAFKA_SASL_PASSWORD", SASL_PASSWORD.to_owned()),
    ];
    for (key, value) in cases {
        let out = load_agent(dir.path()).arg("config").env(key, &value).output().expect("run config");
        assert_eq!(out.status.code(), Some(2), "{key}: {}", text_of(&out));
        assert_no_secret(key, &text_of(&out), SECRETS);
    }
    // A numeric token is text: accepted, and never printed.
    let out = load_agent(dir.path())
        .args(["config", "--print"])
        .env("LOAD_AGENT_HTTP_TOKEN", "4815162342")
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", text_of(&out));
    assert_no_secret("numeric token", &text_of(&out), &["4815162342"]);
}

#[test]
fn errors_that_name_the_database_url_mask_its_password() {
    let dir = TempDir::new();
    // A "server" that hangs up at once: the store cannot open (a refused connection would be
    // retried by the pool until its timeout).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    let url = format!("postgres://app:{DB_PASSWORD}@127.0.0.1:{port}/la");
    for args in [&["serve"][..], &["migrate"], &["inspect", "L1"], &["cost", "L1"]] {
        let out = load_agent(dir.path())
            .args(args)
            .env("LOAD_AGENT_DATABASE_URL", &url)
            .env("LOAD_AGENT_LOG_LEVEL", "trace")
            .env("LOAD_AGENT_HTTP_ADDR", format!("127.0.0.1:{}", free_port()))
            .output()
            .expect("run");
        let printed = text_of(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {printed}");
        assert_no_secret(&format!("{args:?}"), &printed, &[DB_PASSWORD]);
        // `migrate` prints the store's error alone; the others name the database, masked.
        if args[0] != "migrate" {
            assert!(
                printed.contains(&format!("app:***@127.0.0.1:{port}")),
                "{args:?} does not name the database: {printed}"
            );
        }
    }
}

#[test]
fn serve_never_logs_a_secret_and_requires_its_token() {
    let dir = TempDir::new();
    let base = load_agent_testkit::pg::database_url();
    let run = format!("security{}", std::process::id());
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let admin = rt.block_on(sqlx::PgPool::connect(&base)).unwrap_or_else(|e| {
        panic!(
            "this test needs the Postgres server of DATABASE_URL ({base}); ./scripts/test.sh starts it: {e}"
        )
    });
    rt.block_on(async {
        sqlx::query(&format!("DROP DATABASE IF EXISTS {run}")).execute(&admin).await.expect("drop");
        sqlx::query(&format!("CREATE DATABASE {run}")).execute(&admin).await.expect("create database");
    });
    // The server of DATABASE_URL with a password in the URL (trust authentication ignores it;
    // an existing password stays, and is then the secret to look for).
    let (scheme, rest) = base.split_once("://").expect("DATABASE_URL is a URL");
    let (authority, _) = rest.split_once('/').expect("DATABASE_URL names a database");
    let (userinfo, host) = authority.rsplit_once('@').unwrap_or(("postgres", authority));
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (u, p.to_owned()),
        None => (userinfo, DB_PASSWORD.to_owned()),
    };
    let url = format!("{scheme}://{user}:{password}@{host}/{run}");
    let mut secrets = SECRETS.to_vec();
    secrets.push(&password);

    let mut env = secret_env(&url);
    env.push(("LOAD_AGENT_LOG_LEVEL", "trace".into()));
    let serve = Serve::start(dir.path(), &env);
    let port = serve.port;
    // The token: required on /events, /loads, /metrics; the probes answer without it.
    assert_eq!(http(port, "GET", "/metrics", None, None).map(|r| r.0), Some(401));
    assert_eq!(http(port, "GET", "/metrics", Some("wrong-token"), None).map(|r| r.0), Some(401));
    assert_eq!(http(port, "GET", "/loads/L1", Some(&HTTP_TOKEN[1..]), None).map(|r| r.0), Some(401));
    assert_eq!(http(port, "POST", "/events", None, Some("{}")).map(|r| r.0), Some(401));
    assert_eq!(http(port, "GET", "/metrics", Some(HTTP_TOKEN), None).map(|r| r.0), Some(200));
    assert_eq!(http(port, "GET", "/readyz", None, None).map(|r| r.0), Some(200));
    post_and_wait_for_the_sms(&serve, &format!("{run}-L1"), Some(HTTP_TOKEN));
    let printed = serve.stop();

    rt.block_on(async {
        admin.close().await;
        let admin = sqlx::PgPool::connect(&base).await.expect("reconnect");
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {run} WITH (FORCE)")).execute(&admin).await;
    });
    assert!(printed.contains("load-agent serving"), "the startup was not logged:\n{printed}");
    assert!(
        printed.contains(&format!("{user}:***@{host}/{run}")),
        "the database is named masked:\n{printed}"
    );
    assert!(printed.contains("TRACE") || printed.contains("DEBUG"), "not logged at trace:\n{printed}");
    assert_no_secret("serve at trace", &printed, &secrets);
}

/// The delivery lines of the fake services, each with its `text=` field.
fn delivery_lines(output: &str) -> Vec<(&str, &str)> {
    let lines: Vec<(&str, &str)> = output
        .lines()
        .filter(|l| l.contains(DELIVERED))
        .map(|l| (l, l.split_once(" text=").map(|(_, t)| t.trim()).expect("a text field")))
        .collect();
    assert!(!lines.is_empty(), "no delivery line:\n{output}");
    lines
}

#[test]
fn phone_numbers_emails_and_message_text_are_redacted_unless_debug_pii() {
    let run = format!("pii{}", std::process::id());
    let serve_with = |debug_pii: bool| {
        let dir = TempDir::new();
        let env = vec![
            ("LOAD_AGENT_DATABASE_URL", format!("sqlite://{}", dir.path().join("la.db").display())),
            ("LOAD_AGENT_LOG_LEVEL", "debug".to_owned()),
            ("LOAD_AGENT_LOG_DEBUG_PII", debug_pii.to_string()),
        ];
        let serve = Serve::start(dir.path(), &env);
        post_and_wait_for_the_sms(&serve, &format!("{run}-{debug_pii}"), None);
        serve.stop()
    };

    // With log.debug_pii the values are shown: the check below looks for what is really there.
    let revealed = serve_with(true);
    let shown = delivery_lines(&revealed);
    for (line, text) in &shown {
        assert!(
            !text.is_empty() && !text.ends_with("chars redacted>"),
            "log.debug_pii shows the text: {line}"
        );
    }
    let all: String = shown.iter().map(|(_, t)| format!("{t}\n")).collect();
    assert!(all.contains("Store 88"), "the reply names the receiver: {all}");
    assert!(all.contains(UNKNOWN_PHONE), "the Hero task quotes the unknown number: {all}");

    let redacted = serve_with(false);
    for (line, text) in delivery_lines(&redacted) {
        assert!(text.ends_with("chars redacted>"), "{line}");
        assert!(!line.contains(" to=+") && !line.contains('@'), "{line}");
    }
    let mut pii =
        vec![PHONE, &PHONE[2..], UNKNOWN_PHONE, &UNKNOWN_PHONE[2..], EMAIL, INBOUND_TEXT, UNKNOWN_TEXT];
    pii.extend(shown.iter().map(|(_, t)| *t));
    for p in pii {
        assert!(!redacted.contains(p), "{p:?} is in the log without log.debug_pii:\n{redacted}");
    }
}
