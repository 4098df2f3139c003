//! The raw limit in the same run: pgbench with the transaction shape of one append (read the
//! load's version, insert one inbound entry and one decision entry, insert two outbox rows,
//! commit) on copies of the store's own tables (`LIKE ... INCLUDING ALL`, so the same columns,
//! keys and indexes, but one plain table each: the ceiling of one flush per commit, without the
//! partition routing and directory lookup the store adds), in the schema `load_agent_pgbench` of
//! the same database.

use std::process::Command;

use serde::Serialize;

const SCHEMA: &str = "load_agent_pgbench";

const SETUP: &str = "
CREATE SCHEMA IF NOT EXISTS load_agent_pgbench;
DROP TABLE IF EXISTS load_agent_pgbench.log_entries, load_agent_pgbench.outbox;
CREATE TABLE load_agent_pgbench.log_entries (LIKE public.log_entries INCLUDING ALL);
CREATE TABLE load_agent_pgbench.outbox (LIKE public.outbox INCLUDING ALL);
";

/// One append: the version check, two log rows (about 300 and 700 bytes, the sizes of an
/// inbound SMS and its decision in Avro), two outbox rows. Each client appends to loads of its
/// own, as the service runs one append at a time per load (two clients racing on one load
/// would hit the primary key, which the service turns into a re-decide).
const APPEND: &str = "\\set load :client_id * 1000000 + random(1, 200000)
BEGIN;
SELECT coalesce(max(seq), 0) AS v FROM load_agent_pgbench.log_entries WHERE load_id = :load::text \\gset
INSERT INTO load_agent_pgbench.log_entries (load_id, seq, entry_id, kind, recorded_at, schema_id, body, load_month) VALUES
  (:load::text, :v + 1, 'e-' || :load || '-' || (:v + 1), 'sms', now(), 1, convert_to(repeat('x', 300), 'UTF8'), date_trunc('month', now())::date),
  (:load::text, :v + 2, 'dec:e-' || :load || '-' || (:v + 1), 'decision', now(), 4, convert_to(repeat('y', 700), 'UTF8'), date_trunc('month', now())::date);
INSERT INTO load_agent_pgbench.outbox (id, load_id, load_version, destination, action, created_at) VALUES
  (:load || '/evt:' || (:v + 1) || '/send_sms', :load::text, :v + 2, 'sms', repeat('z', 300), now()),
  (:load || '/evt:' || (:v + 1) || '/set_timer', :load::text, :v + 2, 'timer', repeat('t', 100), now());
END;
";

/// pgbench's result at one client count.
#[derive(Debug, Clone, Serialize)]
pub struct PgbenchFigure {
    pub clients: u32,
    pub seconds: u32,
    pub appends_per_sec: f64,
}

/// Runs pgbench for `seconds` at each of `clients` against `database_url` (a libpq URI).
pub fn run(database_url: &str, clients: &[u32], seconds: u32) -> Result<Vec<PgbenchFigure>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("pgbench: temporary folder: {e}"))?;
    let script = dir.path().join("append.sql");
    std::fs::write(&script, APPEND).map_err(|e| format!("pgbench: {}: {e}", script.display()))?;
    psql(database_url, SETUP)?;
    let mut out = Vec::new();
    for &c in clients {
        psql(database_url, &format!("TRUNCATE {SCHEMA}.log_entries, {SCHEMA}.outbox;"))?;
        let output = Command::new("pgbench")
            .args(["-n", "-f"])
            .arg(&script)
            .args(["-c", &c.to_string(), "-j", &c.clamp(1, 2).to_string(), "-T", &seconds.to_string()])
            .arg(database_url)
            .output()
            .map_err(|e| format!("pgbench: cannot run it ({e}); install postgresql-client"))?;
        let text = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(format!("pgbench failed: {}{}", text, String::from_utf8_lossy(&output.stderr)));
        }
        let tps = parse_tps(&text).ok_or_else(|| format!("pgbench: no tps line in its output:\n{text}"))?;
        out.push(PgbenchFigure { clients: c, seconds, appends_per_sec: tps });
    }
    psql(database_url, &format!("DROP SCHEMA {SCHEMA} CASCADE;"))?;
    Ok(out)
}

fn psql(database_url: &str, sql: &str) -> Result<(), String> {
    let output = Command::new("psql")
        .args(["-q", "-v", "ON_ERROR_STOP=1", "-d", database_url, "-c", sql])
        .output()
        .map_err(|e| format!("psql: cannot run it ({e}); install postgresql-client"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("psql: {}", String::from_utf8_lossy(&output.stderr).trim()))
    }
}

/// `tps = 1234.5 (without initial connection time)` → 1234.5.
fn parse_tps(out: &str) -> Option<f64> {
    out.lines().find_map(|l| l.strip_prefix("tps = ")?.split_whitespace().next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tps_line_is_read() {
        let out = "number of failed transactions: 0 (0.000%)\nlatency average = 9.1 ms\n\
                   initial connection time = 12.3 ms\ntps = 1751.214315 (without initial connection time)\n";
        assert_eq!(parse_tps(out), Some(1751.214315));
        assert_eq!(parse_tps("nothing"), None);
    }
}
