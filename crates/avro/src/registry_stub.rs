//! A small stub of the Confluent schema registry REST API on 127.0.0.1 (tokio), for tests of
//! the registry path here and in the crates that use it (feature `registry-stub`; never in a
//! production build). It serves `GET /schemas/ids/{id}`, `POST /subjects/{subject}/versions`,
//! `POST /subjects/{subject}` and `GET /subjects/{subject}/versions/latest`.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Subjects and their versions; ids are global and start at 101 so they never collide with
/// the embedded ones.
#[derive(Default)]
pub struct Stub {
    pub schemas: Vec<String>,              // index + 101 = id
    pub subjects: Vec<(String, Vec<u32>)>, // subject -> ids by version
    pub requests: Vec<String>,
}

impl Stub {
    fn id_of(&mut self, schema: &str) -> u32 {
        let pos = self.schemas.iter().position(|s| s == schema).unwrap_or_else(|| {
            self.schemas.push(schema.to_owned());
            self.schemas.len() - 1
        });
        pos as u32 + 101
    }

    fn versions(&mut self, subject: &str) -> &mut Vec<u32> {
        if !self.subjects.iter().any(|(s, _)| s == subject) {
            self.subjects.push((subject.to_owned(), Vec::new()));
        }
        let i = self.subjects.iter().position(|(s, _)| s == subject).unwrap_or(0);
        &mut self.subjects[i].1
    }

    fn handle(&mut self, method: &str, path: &str, body: &str) -> (u16, Value) {
        self.requests.push(format!("{method} {path}"));
        let path = path.split('?').next().unwrap_or(path);
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let not_found = |code: u32| (404, json!({"error_code": code, "message": "not found"}));
        let schema_of = |body: &str| -> Option<String> {
            serde_json::from_str::<Value>(body).ok()?.get("schema")?.as_str().map(str::to_owned)
        };
        match (method, parts.as_slice()) {
            ("GET", ["schemas", "ids", id]) => {
                match id.parse::<usize>().ok().and_then(|i| i.checked_sub(101)) {
                    Some(i) if i < self.schemas.len() => (200, json!({"schema": self.schemas[i]})),
                    _ => not_found(40403),
                }
            }
            ("POST", ["subjects", subject, "versions"]) => {
                let Some(schema) = schema_of(body) else {
                    return (422, json!({"error_code": 42201, "message": "bad"}));
                };
                let id = self.id_of(&schema);
                let versions = self.versions(subject);
                if !versions.contains(&id) {
                    versions.push(id);
                }
                (200, json!({"id": id}))
            }
            ("POST", ["subjects", subject]) => {
                let Some(schema) = schema_of(body) else { return not_found(40403) };
                let Some(id) = self.schemas.iter().position(|s| *s == schema).map(|p| p as u32 + 101) else {
                    return not_found(40403);
                };
                match self.subjects.iter().find(|(s, _)| s == subject) {
                    Some((_, versions)) if versions.contains(&id) => {
                        let version = versions.iter().position(|v| *v == id).unwrap_or(0) + 1;
                        (200, json!({"subject": subject, "id": id, "version": version, "schema": schema}))
                    }
                    Some(_) => not_found(40403),
                    None => not_found(40401),
                }
            }
            ("GET", ["subjects", subject, "versions", "latest"]) => {
                match self
                    .subjects
                    .iter()
                    .find(|(s, _)| s == subject)
                    .and_then(|(_, v)| v.last().map(|id| (*id, v.len())))
                {
                    Some((id, version)) => (
                        200,
                        json!({"subject": subject, "id": id, "version": version, "schema": self.schemas[(id - 101) as usize]}),
                    ),
                    None => not_found(40401),
                }
            }
            _ => not_found(40400),
        }
    }
}

async fn serve_one(mut socket: TcpStream, stub: Arc<Mutex<Stub>>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head_len, content_length) = loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..pos]).to_string();
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0usize);
            break (pos + 4, len);
        }
    };
    while buf.len() < head_len + content_length {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..head_len]).to_string();
    let mut request_line = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (request_line.next().unwrap_or(""), request_line.next().unwrap_or(""));
    let body = String::from_utf8_lossy(&buf[head_len..]).to_string();
    let (status, json) = stub.lock().map(|mut s| s.handle(method, path, &body)).unwrap_or((500, json!({})));
    let payload = json.to_string();
    let response = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/vnd.schemaregistry.v1+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    );
    socket.write_all(response.as_bytes()).await?;
    socket.shutdown().await
}

/// Starts the stub; returns its base URL and its state.
pub async fn start_stub() -> (String, Arc<Mutex<Stub>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let stub = Arc::new(Mutex::new(Stub::default()));
    let state = stub.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let state = state.clone();
            tokio::spawn(async move {
                let _ = serve_one(socket, state).await;
            });
        }
    });
    (url, stub)
}
