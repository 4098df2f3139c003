//! TLS to Postgres, configured by the database URL alone (`sslmode`, `sslrootcert`; sqlx with
//! rustls). Runs against the Postgres server of `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), which must have `ssl = on` with a self-signed
//! certificate for `localhost`, as Debian's cluster has out of the box (the snakeoil
//! certificate). Fails, never skips, when it has not: the cluster is not reconfigured here.

use std::time::Duration;

use load_agent_store::{PgStore, StoreError, StoreOptions, open_store_with};

const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

fn base_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned())
}

/// `url` with `params` added to its query string.
fn with_params(url: &str, params: &str) -> String {
    if url.contains('?') { format!("{url}&{params}") } else { format!("{url}?{params}") }
}

/// `url` with its host replaced (user, password, port, database and query kept).
fn with_host(url: &str, host: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("DATABASE_URL is a URL");
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    let port = hostport.rsplit_once(':').map(|(_, p)| format!(":{p}")).unwrap_or_default();
    format!("{scheme}://{userinfo}{host}{port}{tail}")
}

fn options() -> StoreOptions {
    StoreOptions { max_connections: 2, acquire_timeout: Duration::from_secs(10), ..StoreOptions::default() }
}

/// A store in a fresh schema on `url`.
async fn open_in_schema(url: &str) -> Result<PgStore, StoreError> {
    let schema = format!("tls_{}", uuid::Uuid::new_v4().simple());
    PgStore::connect_in_schema_with(url, &schema, &options()).await
}

/// Whether the connection the pool hands out is encrypted, as the server sees it.
async fn encrypted(store: &PgStore) -> bool {
    sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(store.pool())
        .await
        .expect("pg_stat_ssl")
}

/// The server's TLS setting and certificate file, read over a plaintext connection.
async fn server_tls() -> (String, String) {
    let url = with_params(&base_url(), "sslmode=disable");
    let store = open_in_schema(&url).await.unwrap_or_else(|e| {
        panic!(
            "the TLS tests need the Postgres server of DATABASE_URL (scripts/test.sh starts the local one): {e}"
        )
    });
    let ssl: String = sqlx::query_scalar("SHOW ssl").fetch_one(store.pool()).await.expect("SHOW ssl");
    let cert: String =
        sqlx::query_scalar("SHOW ssl_cert_file").fetch_one(store.pool()).await.expect("SHOW ssl_cert_file");
    assert!(!encrypted(&store).await, "sslmode=disable must not encrypt: the check below could not fail");
    store.drop_schema().await.expect("drop the schema");
    assert_eq!(
        ssl, "on",
        "the Postgres server has ssl = off: these tests need a TLS-enabled server (Debian's cluster has \
         ssl = on with the snakeoil certificate); they do not reconfigure it"
    );
    (ssl, cert)
}

/// The error text of a store that must not open.
async fn refused(url: &str) -> String {
    match open_store_with(url, &options()).await {
        Ok(_) => panic!("the store opened, but the server's certificate must have been refused"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn sslmode_require_encrypts_the_connection() {
    server_tls().await;
    let store = open_in_schema(&with_params(&base_url(), "sslmode=require")).await.expect("sslmode=require");
    assert!(encrypted(&store).await, "sslmode=require gave a plaintext connection");
    let version: Option<String> =
        sqlx::query_scalar("SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(store.pool())
            .await
            .expect("pg_stat_ssl.version");
    assert!(version.as_deref().is_some_and(|v| v.starts_with("TLSv1.")), "{version:?}");
    store.drop_schema().await.expect("drop the schema");
}

#[tokio::test]
async fn verify_full_without_the_servers_ca_is_refused_clearly() {
    server_tls().await;
    // No sslrootcert: the bundled public roots, which never signed a self-signed certificate.
    let e = refused(&with_params(&base_url(), "sslmode=verify-full")).await;
    assert!(e.contains("invalid peer certificate: UnknownIssuer"), "not a clear TLS error: {e}");
    // The wrong root: a public CA bundle.
    let bundle = "/etc/ssl/certs/ca-certificates.crt";
    assert!(std::path::Path::new(bundle).exists(), "{bundle} (Debian's ca-certificates) is missing");
    let e = refused(&with_params(&base_url(), &format!("sslmode=verify-full&sslrootcert={bundle}"))).await;
    assert!(e.contains("invalid peer certificate: UnknownIssuer"), "{e}");
    // A root file that does not exist.
    let e = refused(&with_params(&base_url(), "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")).await;
    assert!(e.contains("No such file"), "{e}");
}

#[tokio::test]
async fn verify_full_with_the_servers_ca_checks_the_host_name() {
    let (_, cert) = server_tls().await;
    let root = format!("sslrootcert={cert}");
    // The snakeoil certificate names `localhost`: verify-full accepts it there...
    let url = with_params(&with_host(&base_url(), "localhost"), &format!("sslmode=verify-full&{root}"));
    let store = open_in_schema(&url).await.expect("verify-full with the server's CA, host localhost");
    assert!(encrypted(&store).await);
    store.drop_schema().await.expect("drop the schema");
    // ...and refuses it for another name.
    let url = with_params(&with_host(&base_url(), "127.0.0.1"), &format!("sslmode=verify-full&{root}"));
    let e = refused(&url).await;
    assert!(e.contains("certificate not valid for name \"127.0.0.1\""), "{e}");
    // Not tested: sslmode=verify-ca. sqlx 0.8.6 builds its verifier from rustls's process-wide
    // crypto provider, which panics when rustls is built with both ring and aws-lc-rs (as in the
    // workspace build); load-agent refuses verify-ca at start (docs/security.md).
}

#[test]
fn urls_are_rewritten_as_the_tests_expect() {
    assert_eq!(
        with_params("postgres://u@h:5432/db", "sslmode=require"),
        "postgres://u@h:5432/db?sslmode=require"
    );
    assert_eq!(
        with_params("postgres://u@h/db?a=b", "sslmode=require"),
        "postgres://u@h/db?a=b&sslmode=require"
    );
    assert_eq!(
        with_host("postgres://u:p@127.0.0.1:5432/test", "localhost"),
        "postgres://u:p@localhost:5432/test"
    );
    assert_eq!(with_host("postgres://h/test?x=1", "localhost"), "postgres://localhost/test?x=1");
}
