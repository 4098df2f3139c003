//! Postgres for tests: where they run ([`database_url`]) and a schema at an older migration
//! ([`schema_at_migration`]), for tests of what a later migration does to existing rows.

use std::path::Path;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// Where the Postgres tests run: `DATABASE_URL`, else `postgres://postgres@127.0.0.1:5432/test`.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Creates `schema` on `url` and applies the Postgres migrations up to `version` only (say 3:
/// the unpartitioned log before migration 0004); returns a one-connection pool whose search path
/// is that schema. For tests of what a later migration does to existing rows.
pub async fn schema_at_migration(url: &str, schema: &str, version: i64) -> PgPool {
    let admin = PgPool::connect(url).await.expect("connect to Postgres");
    sqlx::query(&format!("CREATE SCHEMA \"{schema}\"")).execute(&admin).await.expect("create the schema");
    admin.close().await;
    let options: PgConnectOptions = url.parse().expect("a Postgres URL");
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options.options([("search_path", schema)]))
        .await
        .expect("connect to the schema");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/postgres");
    let mut migrator = sqlx::migrate::Migrator::new(dir).await.expect("read the migrations");
    migrator.migrations =
        migrator.migrations.iter().filter(|m| m.version <= version).cloned().collect::<Vec<_>>().into();
    migrator.run(&pool).await.expect("apply the migrations");
    pool
}
