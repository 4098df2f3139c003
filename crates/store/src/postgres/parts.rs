//! Partitions named directly by the hot statements (the append, the marks).
//!
//! Postgres 15 locks every partition a generic plan names at each execution, pruned or not, and
//! a statement through a parent plans and sets up every partition; named directly, a statement's
//! plan holds one table whatever the number of partitions kept (docs/capacity.md, "Ids compared
//! bytewise, partitions named"). A statement names a partition only after the store has seen it
//! attached to its parent (checked once a minute per partition): a month or a day without its
//! own partition keeps its rows in the parent's default partition, which only the parent reaches.
//! A partition dropped by retention since fails the statement that names it ([`undefined_table`]),
//! which then runs through the parent.

use std::future::Future;
use std::time::Duration;

use sqlx::{Executor, Postgres};

/// How many partitions a store remembers as attached or not, and for how long: a partition made
/// since is named by the statements at most this long after.
const REMEMBERED: u64 = 10_000;
const CHECKED_EVERY: Duration = Duration::from_secs(60);

/// Whether partition `$1` is attached to parent `$2` (both resolved by the search path).
const ATTACHED: &str = "SELECT EXISTS (SELECT 1 FROM pg_inherits \
    WHERE inhrelid = to_regclass($1) AND inhparent = to_regclass($2))";

/// Which partitions this store has seen attached, by name.
#[derive(Clone)]
pub(crate) struct AttachedParts(moka::sync::Cache<String, bool>);

impl AttachedParts {
    pub(crate) fn new() -> Self {
        AttachedParts(
            moka::sync::Cache::builder().max_capacity(REMEMBERED).time_to_live(CHECKED_EVERY).build(),
        )
    }

    /// `part` when it is attached to `parent`, else `None` (use the parent).
    pub(crate) async fn attached<'c, E>(
        &self,
        executor: E,
        parent: &str,
        part: String,
    ) -> Result<Option<String>, sqlx::Error>
    where
        E: Executor<'c, Database = Postgres>,
    {
        let attached = match self.0.get(&part) {
            Some(attached) => attached,
            None => {
                let attached: bool =
                    sqlx::query_scalar(ATTACHED).bind(&part).bind(parent).fetch_one(executor).await?;
                self.0.insert(part.clone(), attached);
                attached
            }
        };
        Ok(attached.then_some(part))
    }

    /// `part` failed a statement as a missing table: check it again before naming it.
    pub(crate) fn forget(&self, part: &str) {
        self.0.invalidate(part);
    }

    /// Runs `run` with the table to name: `part` when it is attached to `parent` (checked on
    /// `executor`), else `parent`; when `part` was dropped since it was seen attached (the run
    /// fails with [`undefined_table`]), forgets it and runs again with `parent`. `None`: the
    /// statement's rows are not all in one partition, so `parent`.
    pub(crate) async fn through<'c, E, T, F, Fut>(
        &self,
        executor: E,
        parent: &str,
        part: Option<String>,
        run: F,
    ) -> Result<T, sqlx::Error>
    where
        E: Executor<'c, Database = Postgres>,
        F: Fn(String) -> Fut,
        Fut: Future<Output = Result<T, sqlx::Error>>,
    {
        let named = match part {
            Some(part) => self.attached(executor, parent, part).await?,
            None => None,
        };
        match named {
            Some(part) => match run(part.clone()).await {
                Err(e) if undefined_table(&e) => {
                    self.forget(&part);
                    run(parent.to_owned()).await
                }
                done => done,
            },
            None => run(parent.to_owned()).await,
        }
    }
}

/// Whether a statement failed because a table it names does not exist (a partition dropped
/// since the store last saw it attached).
pub(crate) fn undefined_table(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("42P01"))
}
