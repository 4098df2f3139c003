//! `DeadLetterStore` on SQLite: the insert runs in the writer's transaction, the read on the
//! reader pool.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteConnection;

use super::SqliteStore;
use super::command::WriteCmd;
use crate::codec::{parse_sqlite_time, sqlite_time};
use crate::dead_letters::{DeadLetterStore, KeptDeadLetter, decode_headers, encode_headers};
use crate::error::StoreError;

/// Same statement as `postgres/dead_letters.rs`.
pub(super) async fn keep_in(conn: &mut SqliteConnection, letter: &KeptDeadLetter) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO dead_letters (source_topic, source_partition, source_offset, record_key, headers, \
         value, error_code, error, kept_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
         ON CONFLICT (source_topic, source_partition, source_offset) DO NOTHING",
    )
    .bind(&letter.source_topic)
    .bind(letter.source_partition)
    .bind(letter.source_offset)
    .bind(letter.key.as_deref())
    .bind(encode_headers(&letter.headers))
    .bind(letter.value.as_deref())
    .bind(&letter.error_code)
    .bind(&letter.error)
    .bind(sqlite_time(letter.kept_at))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[async_trait]
impl DeadLetterStore for SqliteStore {
    async fn keep_dead_letter(&self, letter: &KeptDeadLetter) -> Result<(), StoreError> {
        let letter = Box::new(letter.clone());
        self.write(|reply| WriteCmd::KeepDeadLetter { letter, reply }).await?
    }

    async fn kept_dead_letter(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<Option<KeptDeadLetter>, StoreError> {
        let row = sqlx::query(
            "SELECT record_key, headers, value, error_code, error, kept_at FROM dead_letters \
             WHERE source_topic = ?1 AND source_partition = ?2 AND source_offset = ?3",
        )
        .bind(topic)
        .bind(partition)
        .bind(offset)
        .fetch_optional(&self.readers)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let headers: Vec<u8> = row.try_get("headers")?;
        let kept_at: String = row.try_get("kept_at")?;
        Ok(Some(KeptDeadLetter {
            source_topic: topic.to_owned(),
            source_partition: partition,
            source_offset: offset,
            key: row.try_get("record_key")?,
            headers: decode_headers(&headers)?,
            value: row.try_get("value")?,
            error_code: row.try_get("error_code")?,
            error: row.try_get("error")?,
            kept_at: parse_sqlite_time("dead_letters.kept_at", &kept_at)?,
        }))
    }
}
