//! The operations console in a real browser (docs/console.md): headless Chromium, driven
//! through the Chrome DevTools Protocol, against `load-agent serve` over the demo data, checks
//! what a person sees:
//!
//! 1. `/` without signing in: the sign-in form, with status 401;
//! 2. a wrong token: the error; the right token: an HttpOnly cookie and the attention list with
//!    reason badges;
//! 3. the filter form, a reason then a client: the list narrows to the loads with both, as many
//!    as `#total` and the counts per reason say;
//! 4. a load's link: its page, with the timeline (a decision and its path), asks and actions.
//!
//! Screenshots of each step go to `target/console-screenshots/` (under `CARGO_TARGET_DIR` when
//! set) for review.
//!
//! Needs Debian's `chromium` (`./scripts/test.sh` installs it; `CHROMIUM_BIN` names another
//! binary): without it the test fails, never skips.
//!
//! The DevTools client is the small one below, over `--remote-debugging-pipe` (the transport
//! Puppeteer and Playwright use: NUL-terminated JSON messages on the browser's file descriptors 3
//! and 4): no WebSocket, no port to find, and no crate beyond what the workspace already has.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_load-agent");
const TOKEN: &str = "console-browser-token-4Tq9";
/// How long one page may take to load, or one DevTools command to answer.
const WAIT: Duration = Duration::from_secs(30);

// --- the service ---------------------------------------------------------------------------------

/// The workspace's root (where `evals/dumps/` is).
fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// `target/console-screenshots/` of this workspace, or under `CARGO_TARGET_DIR`.
fn screenshot_dir() -> PathBuf {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if Path::new(&dir).is_absolute() => PathBuf::from(dir),
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    };
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// The `load-agent` command with no inherited `LOAD_AGENT_*` or `RUST_LOG`.
fn load_agent() -> Command {
    let mut c = Command::new(BIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("LOAD_AGENT_") || k == "RUST_LOG" {
            c.env_remove(k);
        }
    }
    c.current_dir(workspace_root()).env("NO_COLOR", "1").stdin(Stdio::null());
    c
}

/// A port free now, below Linux's ephemeral range (as tests/common/mod.rs chooses them).
fn free_port() -> u16 {
    let base = std::process::id() % 1000 * 11;
    (0..2000u32)
        .filter_map(|n| u16::try_from(20_000 + (base + n * 7) % 12_000).ok())
        .find(|port| std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("a free port between 20000 and 32000")
}

/// `load-agent serve` over the demo database; killed on drop.
struct Serve {
    child: Child,
    port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// `dir` holds the database; the console's settings are written there too.
    fn start(dir: &Path, db: &Path) -> Serve {
        let port = free_port();
        // The demo was recorded in 2026: a window of ten years keeps its urgent tasks listed.
        // The page refreshes itself, but not during the test. (A file, not
        // LOAD_AGENT_CONSOLE_*: those are refused as an unknown section.)
        let config = dir.join("console.toml");
        std::fs::write(&config, "[console]\nwindow_hours = 87840\nrefresh_secs = 600\n")
            .expect("console.toml");
        let child = load_agent()
            .arg("serve")
            .env("LOAD_AGENT_DATABASE_URL", format!("sqlite://{}", db.display()))
            .env("LOAD_AGENT_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("LOAD_AGENT_HTTP_TOKEN", TOKEN)
            .env("LOAD_AGENT_CONFIG", config)
            .env("LOAD_AGENT_LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start load-agent serve");
        let mut serve = Serve { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(port, "/readyz", "*/*").map(|(s, _)| s) != Some(200) {
            if let Ok(Some(status)) = serve.child.try_wait() {
                panic!("load-agent serve exited early: {status}");
            }
            assert!(Instant::now() < deadline, "load-agent serve was not ready within 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        serve
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// A plain HTTP/1.1 GET: the status and the whole response.
fn http_get(port: u16, path: &str, accept: &str) -> Option<(u16, String)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {accept}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let status = resp.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, resp))
}

// --- the browser -----------------------------------------------------------------------------------

/// The Chromium binary: `CHROMIUM_BIN`, or `chromium` / `chromium-browser` on the `PATH`.
fn chromium_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("CHROMIUM_BIN").filter(|b| !b.is_empty()) {
        let bin = PathBuf::from(bin);
        assert!(
            bin.is_file(),
            "CHROMIUM_BIN={} is not a file: unset it to use `chromium` from the PATH, which \
             ./scripts/test.sh installs (apt-get install chromium)",
            bin.display()
        );
        return bin;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|bin| bin.is_file())
        .unwrap_or_else(|| {
            panic!(
                "headless Chromium is needed for the console's browser test and none was found \
                 (no `chromium` on the PATH, CHROMIUM_BIN unset): ./scripts/test.sh installs it \
                 (apt-get install chromium)"
            )
        })
}

/// Headless Chromium with one page, driven over the DevTools pipe; closed on drop.
struct Browser {
    child: Child,
    /// The browser's file descriptor 3: commands in.
    commands: ChildStdin,
    /// The messages of its file descriptor 4, parsed, from a reader thread.
    messages: Receiver<Value>,
    /// Events read while waiting for something else, oldest first.
    events: Vec<Value>,
    next_id: u64,
    /// The DevTools session of the page.
    session: String,
    profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let id = self.next_id;
        let _ = self.send(&json!({"id": id, "method": "Browser.close", "params": {}}));
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    fn launch() -> Browser {
        let bin = chromium_bin();
        let profile = tempfile::tempdir().expect("a profile directory");
        let log = std::fs::File::create(profile.path().join("chromium.log")).expect("a log file");
        // `sh` hands the browser our pipes as its descriptors 3 and 4 (what
        // --remote-debugging-pipe reads and writes); its own stdout goes to the log with stderr.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>&2"#)
            .arg(&bin)
            .args([
                "--headless",
                // Tests run as root, where Chromium's sandbox cannot start.
                "--no-sandbox",
                "--remote-debugging-pipe",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-default-apps",
                "--disable-extensions",
                "--disable-sync",
                "--mute-audio",
                "--hide-scrollbars",
                "--password-store=basic",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let commands = child.stdin.take().expect("the command pipe");
        let out = child.stdout.take().expect("the message pipe");
        let (tx, messages) = channel();
        std::thread::spawn(move || {
            let mut out = BufReader::new(out);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match out.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if buf.last() == Some(&0) {
                            buf.pop();
                        }
                        let Ok(msg) = serde_json::from_slice::<Value>(&buf) else { continue };
                        if tx.send(msg).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let mut browser = Browser {
            child,
            commands,
            messages,
            events: Vec::new(),
            next_id: 1,
            session: String::new(),
            profile,
        };
        let target = browser.browser_call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().expect("a target id").to_owned();
        let attached =
            browser.browser_call("Target.attachToTarget", json!({"targetId": target_id, "flatten": true}));
        browser.session = attached["sessionId"].as_str().expect("a session id").to_owned();
        browser.call("Page.enable", json!({}));
        browser.call("Network.enable", json!({}));
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        );
        browser
    }

    /// What the browser printed, for a failure's message.
    fn log(&self) -> String {
        let text = std::fs::read_to_string(self.profile.path().join("chromium.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn send(&mut self, msg: &Value) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
        bytes.push(0);
        self.commands.write_all(&bytes)?;
        self.commands.flush()
    }

    /// The next message, or a failure naming `what` was awaited.
    fn next_message(&mut self, deadline: Instant, what: &str) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.messages.recv_timeout(left) {
            Ok(msg) => msg,
            Err(RecvTimeoutError::Timeout) => panic!("Chromium: no {what} within {WAIT:?}"),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("Chromium exited while waiting for {what}; its log ends:\n{}", self.log())
            }
        }
    }

    fn call_in(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        if let Err(e) = self.send(&msg) {
            panic!("Chromium: sending {method}: {e}; its log ends:\n{}", self.log());
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let msg = self.next_message(deadline, &format!("answer to {method}"));
            if msg["id"].as_u64() == Some(id) {
                assert!(msg.get("error").is_none(), "Chromium: {method} {params}: {}", msg["error"]);
                return msg["result"].clone();
            }
            if msg.get("method").is_some() {
                self.events.push(msg);
            }
        }
    }

    fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.call_in(None, method, params)
    }

    /// A command to the page.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.call_in(Some(&session), method, params)
    }

    /// Waits for the page's event `method` (one read before counts).
    fn wait_event(&mut self, method: &str) -> Value {
        if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
            return self.events.remove(i);
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let msg = self.next_message(deadline, method);
            if msg["method"] == method {
                return msg;
            }
            if msg.get("method").is_some() {
                self.events.push(msg);
            }
        }
    }

    /// Does `act`, then waits for the page it leads to to load; returns that page's HTTP status
    /// (of the last document response: after a redirect, the page it landed on).
    fn navigation(&mut self, act: impl FnOnce(&mut Browser)) -> u16 {
        self.events.clear();
        act(self);
        self.wait_event("Page.loadEventFired");
        let status = self
            .events
            .iter()
            .rev()
            .filter(|e| e["method"] == "Network.responseReceived" && e["params"]["type"] == "Document")
            .find_map(|e| e["params"]["response"]["status"].as_u64())
            .expect("a document response before the page loaded");
        u16::try_from(status).expect("an HTTP status")
    }

    /// Goes to `url` as if typed into the address bar; the page's status.
    fn goto(&mut self, url: &str) -> u16 {
        self.navigation(|b| {
            let nav = b.call("Page.navigate", json!({"url": url}));
            assert!(nav.get("errorText").is_none(), "navigating to {url}: {}", nav["errorText"]);
        })
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call("Runtime.evaluate", json!({"expression": expression, "returnByValue": true}));
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// The page's text as a person reads it (what CSS shows).
    fn text(&mut self) -> String {
        self.eval("document.body.innerText").as_str().unwrap_or_default().to_owned()
    }

    fn location(&mut self) -> String {
        self.eval("location.href").as_str().unwrap_or_default().to_owned()
    }

    /// Whether `selector` matches an element that takes room on the page.
    fn visible(&mut self, selector: &str) -> bool {
        let js = format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return false; \
             const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && \
             getComputedStyle(e).visibility !== 'hidden'; }})()",
            sel = json!(selector)
        );
        self.eval(&js) == json!(true)
    }

    /// A left click in the middle of the element `selector` (scrolled into view first), with the
    /// mouse, as a person clicks.
    fn click(&mut self, selector: &str) {
        let js = format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return null; \
             e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); \
             return [r.left + r.width / 2, r.top + r.height / 2]; }})()",
            sel = json!(selector)
        );
        let at = self.eval(&js);
        let (Some(x), Some(y)) = (at[0].as_f64(), at[1].as_f64()) else {
            panic!("nothing to click at {selector} on {}", self.location())
        };
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "buttons": u8::from(kind == "mousePressed"), "clickCount": 1}),
            );
        }
    }

    /// Clicks into the field `selector` and types `text` into it.
    fn type_into(&mut self, selector: &str, text: &str) {
        self.click(selector);
        let focused = format!("document.activeElement === document.querySelector({})", json!(selector));
        assert_eq!(self.eval(&focused), json!(true), "{selector} did not take the focus");
        self.call("Input.insertText", json!({"text": text}));
    }

    /// Chooses `value` in the drop-down `selector`, as picking it with the mouse does.
    fn choose(&mut self, selector: &str, value: &str) {
        let js = format!(
            "(() => {{ const s = document.querySelector({sel}); if (!s) return false; \
             if (![...s.options].some(o => o.value === {v})) return false; s.focus(); s.value = {v}; \
             s.dispatchEvent(new Event('input', {{bubbles: true}})); \
             s.dispatchEvent(new Event('change', {{bubbles: true}})); return true; }})()",
            sel = json!(selector),
            v = json!(value)
        );
        assert_eq!(self.eval(&js), json!(true), "no option {value:?} in {selector}");
    }

    /// A PNG of the whole page (up to 4000 px tall) into `dir/name`.
    fn screenshot(&mut self, dir: &Path, name: &str) -> PathBuf {
        self.eval("window.scrollTo(0, 0)");
        let metrics = self.call("Page.getLayoutMetrics", json!({}));
        let size = &metrics["cssContentSize"];
        let width = size["width"].as_f64().unwrap_or(1280.0).max(1280.0);
        let height = size["height"].as_f64().unwrap_or(900.0).clamp(200.0, 4000.0);
        let shot = self.call(
            "Page.captureScreenshot",
            json!({
                "format": "png",
                "captureBeyondViewport": true,
                "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
            }),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("base64 screenshot");
        assert!(png.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
        let path = dir.join(name);
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        path
    }
}

// --- the test --------------------------------------------------------------------------------------

/// A row of the attention list, as shown.
#[derive(Debug, Clone)]
struct Row {
    load: String,
    /// The classes of its visible reason badges (`urgent_task`, ...).
    reasons: Vec<String>,
    client: String,
    /// The "Open asks" cell ("2 (1 escalated)").
    open_asks: String,
    link: String,
}

fn attention_rows(browser: &mut Browser) -> Vec<Row> {
    let rows = browser.eval(
        "[...document.querySelectorAll('#attention tbody tr[data-load]')].map(tr => ({ \
           load: tr.dataset.load, \
           client: tr.cells[1].innerText.trim(), \
           asks: tr.cells[5].innerText.trim(), \
           link: tr.querySelector('a') ? tr.querySelector('a').getAttribute('href') : '', \
           reasons: [...tr.querySelectorAll('span.badge')].filter(b => b.offsetWidth > 0) \
             .map(b => [...b.classList].find(c => c !== 'badge')) }))",
    );
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    rows.as_array()
        .expect("an array of rows")
        .iter()
        .map(|r| Row {
            load: text(&r["load"]),
            reasons: r["reasons"].as_array().into_iter().flatten().map(text).collect(),
            client: text(&r["client"]),
            open_asks: text(&r["asks"]),
            link: text(&r["link"]),
        })
        .collect()
}

/// The console's cookie in the browser (as DevTools sees it: JavaScript cannot, it is HttpOnly).
fn console_cookie(browser: &mut Browser) -> Option<Value> {
    let cookies = browser.call("Network.getCookies", json!({}));
    cookies["cookies"].as_array()?.iter().find(|c| c["name"] == "load_agent_console").cloned()
}

/// The number in `#total`: "(12)".
fn total(browser: &mut Browser) -> u64 {
    let text =
        browser.eval("document.querySelector('#total') ? document.querySelector('#total').innerText : ''");
    let text = text.as_str().unwrap_or_default();
    text.trim_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .unwrap_or_else(|_| panic!("#total reads {text:?}"))
}

/// The counts per reason above the list (`p.counts a[data-reason]`: "dead action 3").
fn reason_counts(browser: &mut Browser) -> Vec<(String, u64)> {
    let counts = browser.eval(
        "[...document.querySelectorAll('p.counts a[data-reason]')].map(a => [a.dataset.reason, a.innerText])",
    );
    counts
        .as_array()
        .expect("an array of counts")
        .iter()
        .map(|c| {
            let text = c[1].as_str().unwrap_or_default();
            let n = text.rsplit(char::is_whitespace).next().and_then(|n| n.parse().ok());
            (
                c[0].as_str().unwrap_or_default().to_owned(),
                n.unwrap_or_else(|| panic!("a count reads {text:?}")),
            )
        })
        .collect()
}

#[test]
fn console_in_headless_chromium_sign_in_attention_filter_and_load_page() {
    let started = Instant::now();
    // Fails here, not later, without a browser.
    chromium_bin();
    let shots = screenshot_dir();

    // The demo data: recorded traffic replayed through the real worker into SQLite.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = dir.path().join("demo.db");
    let demo = load_agent()
        .args(["demo", "--quiet", "--db"])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run load-agent demo");
    assert!(
        demo.status.success(),
        "load-agent demo failed ({}):\n{}{}",
        demo.status,
        String::from_utf8_lossy(&demo.stdout),
        String::from_utf8_lossy(&demo.stderr)
    );
    let serve = Serve::start(dir.path(), &db);
    let mut browser = Browser::launch();

    // 1. Not signed in: the sign-in form, and the page is a 401.
    let status = browser.goto(&serve.url("/"));
    assert_eq!(status, 401, "/ without the token, in the browser");
    let (plain, _) = http_get(serve.port, "/", "text/html,application/xhtml+xml").expect("GET /");
    assert_eq!(plain, 401, "/ without the token, as a plain HTTP GET asking for HTML");
    assert!(browser.visible("form#login"), "no sign-in form:\n{}", browser.text());
    let kind = browser.eval("document.querySelector('form#login input[name=token]').type");
    assert_eq!(kind, json!("password"), "the token field hides what is typed");
    let text = browser.text();
    assert!(text.contains("Sign in") && !text.contains("Loads that need attention"), "{text}");
    assert!(!browser.visible("#attention"), "the list shows without the token");
    browser.screenshot(&shots, "01-sign-in.png");

    // 2. A wrong token: refused, with the error; the right one: the attention list.
    browser.type_into("form#login input[name=token]", "not-the-token");
    let status = browser.navigation(|b| b.click("form#login button[type=submit]"));
    assert_eq!(status, 401, "a wrong token");
    assert!(browser.visible("#login-error"), "no error for a wrong token:\n{}", browser.text());
    assert!(browser.text().contains("That is not the token."), "{}", browser.text());
    assert_eq!(console_cookie(&mut browser), None, "a wrong token set the console cookie");
    browser.type_into("form#login input[name=token]", TOKEN);
    let status = browser.navigation(|b| b.click("form#login button[type=submit]"));
    assert_eq!(status, 200, "signed in");
    assert_eq!(browser.location(), serve.url("/"), "the sign-in lands on the list");
    let cookie = console_cookie(&mut browser).expect("the console cookie after signing in");
    assert_eq!(cookie["httpOnly"], json!(true), "the console cookie is HttpOnly: {cookie}");
    assert!(!cookie.to_string().contains(TOKEN), "the cookie holds the token: {cookie}");
    let scripts_see = browser.eval("document.cookie");
    assert!(
        !scripts_see.to_string().contains("load_agent_console"),
        "scripts read the cookie: {scripts_see}"
    );
    let text = browser.text();
    assert!(text.contains("Loads that need attention"), "{text}");
    assert!(browser.visible("table#attention"), "no attention list:\n{text}");
    let rows = attention_rows(&mut browser);
    assert!(!rows.is_empty(), "no load needs attention in the demo data:\n{text}");
    assert!(rows.iter().all(|r| !r.reasons.is_empty()), "a row without a reason badge: {rows:?}");
    let all_total = total(&mut browser);
    assert!(all_total >= rows.len() as u64, "#total {all_total} < {} rows", rows.len());
    let counts = reason_counts(&mut browser);
    assert!(!counts.is_empty(), "no counts per reason:\n{text}");
    browser.screenshot(&shots, "02-attention.png");

    // 3. The filter form: a reason that some loads have and others not, chosen and submitted.
    let (reason, expected) = counts
        .iter()
        .find(|(_, n)| *n > 0 && *n < all_total)
        .or_else(|| counts.iter().find(|(_, n)| *n > 0))
        .cloned()
        .expect("a reason with loads");
    browser.choose("form.filters select[name=reason]", &reason);
    let status = browser.navigation(|b| b.click("form.filters button[type=submit]"));
    assert_eq!(status, 200, "the filtered list");
    let here = browser.location();
    assert!(here.contains(&format!("reason={reason}")), "the filter is not in the address: {here}");
    let filtered = attention_rows(&mut browser);
    let filtered_total = total(&mut browser);
    assert!(!filtered.is_empty(), "the {reason} filter shows nothing:\n{}", browser.text());
    assert!(
        filtered.iter().all(|r| r.reasons.contains(&reason)),
        "a row without the {reason} badge under the {reason} filter: {filtered:?}"
    );
    assert_eq!(filtered_total, expected, "#total under the {reason} filter vs its count on the list");
    assert!(
        filtered.len() as u64 == filtered_total || browser.visible("a[rel=next]"),
        "{} rows shown of #total {filtered_total} and no next page",
        filtered.len()
    );
    if expected < all_total {
        assert!(filtered_total < all_total, "the {reason} filter did not narrow the list");
    }
    let selected = browser.eval("document.querySelector('form.filters select[name=reason]').value");
    assert_eq!(selected, json!(reason), "the form keeps the chosen reason");
    // Then a client too, where the reason's loads are of more than one: both filters hold.
    let mut clients: Vec<&str> = filtered.iter().map(|r| r.client.as_str()).collect();
    clients.sort_unstable();
    clients.dedup();
    let filtered = if let [.., client] = clients[..]
        && clients.len() > 1
    {
        let client = client.to_owned();
        browser.choose("form.filters select[name=client]", &client);
        let status = browser.navigation(|b| b.click("form.filters button[type=submit]"));
        assert_eq!(status, 200, "the list filtered by reason and client");
        let both = attention_rows(&mut browser);
        let both_total = total(&mut browser);
        assert!(!both.is_empty(), "{reason} and {client} show nothing:\n{}", browser.text());
        assert!(
            both.iter().all(|r| r.client == client && r.reasons.contains(&reason)),
            "a row not of {client} with {reason}: {both:?}"
        );
        let expected = filtered.iter().filter(|r| r.client == client).count() as u64;
        assert_eq!(both_total, expected, "#total under {reason} and {client}");
        assert!(both_total < filtered_total, "the client filter did not narrow the list");
        both
    } else {
        filtered
    };
    browser.screenshot(&shots, "03-filtered.png");

    // 4. A load's link: its page, with the timeline, asks and actions (the first listed load
    // with an open ask, where there is one).
    let opened = filtered.iter().find(|r| !r.open_asks.starts_with('0')).unwrap_or(&filtered[0]).clone();
    let (load, link) = (opened.load.clone(), opened.link.clone());
    assert_eq!(link, format!("/loads/{load}"), "the link of {load}");
    let selector = format!("#attention tr[data-load={}] td a", json!(load));
    let status = browser.navigation(|b| b.click(&selector));
    assert_eq!(status, 200, "the page of {load}");
    assert_eq!(browser.location(), serve.url(&link), "the link leads to the load's page");
    let shown = browser.eval("document.querySelector('#load-id').innerText");
    assert_eq!(shown, json!(load), "#load-id");
    let text = browser.text();
    assert!(browser.visible("#state") && browser.visible("#stage"), "no state:\n{text}");
    assert!(browser.visible("table#timeline"), "no timeline:\n{text}");
    // Each row an event or a decision; each decision names its path (`decision <b>sop</b>`).
    let timeline = browser.eval(
        "[...document.querySelectorAll('#timeline tbody tr')].map(tr => ({ kind: tr.className, \
           path: tr.classList.contains('decision') && tr.cells[2].querySelector('strong') \
             ? tr.cells[2].querySelector('strong').innerText : null }))",
    );
    let timeline = timeline.as_array().expect("timeline rows").clone();
    assert!(timeline.iter().any(|r| r["kind"] == "event"), "no event in the timeline: {timeline:?}");
    let decisions: Vec<&Value> = timeline.iter().filter(|r| r["kind"] == "decision").collect();
    assert!(!decisions.is_empty(), "no decision in the timeline: {timeline:?}");
    let mut paths: Vec<&str> = decisions.iter().map(|d| d["path"].as_str().unwrap_or_default()).collect();
    assert!(paths.iter().all(|p| !p.is_empty()), "a decision without its path: {timeline:?}");
    paths.sort_unstable();
    paths.dedup();
    assert!(
        text.contains("Asks") && text.contains("Actions (outbox)") && text.contains("Timeline"),
        "{text}"
    );
    let asks = browser.visible("table#asks");
    let actions = browser.visible("table#actions");
    assert!(asks || text.contains("No ask was opened."), "neither asks nor their absence:\n{text}");
    assert!(actions || text.contains("No action was sent."), "neither actions nor their absence:\n{text}");
    assert!(browser.visible("table#contacts"), "no contacts:\n{text}");
    assert!(text.contains(&opened.client), "the page does not name the client {}:\n{text}", opened.client);
    browser.screenshot(&shots, "04-load.png");

    drop(browser);
    drop(serve);
    eprintln!(
        "console_browser: {} loads listed, {reason} filter {filtered_total}, opened {load} \
         ({} decisions, paths {paths:?}, asks: {asks}, actions: {actions}); screenshots in {}; {:.1} s",
        rows.len(),
        decisions.len(),
        shots.display(),
        started.elapsed().as_secs_f64()
    );
}
