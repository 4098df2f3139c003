-- Bodies of dead letters the DLQ topic cannot hold as they are (crates/store/src/dead_letters.rs):
-- the DLQ record is written reduced and names its row here by source topic/partition/offset.
CREATE TABLE dead_letters (
    source_topic TEXT NOT NULL,
    source_partition INTEGER NOT NULL,
    source_offset INTEGER NOT NULL,
    record_key BLOB,
    headers BLOB NOT NULL,
    value BLOB,
    error_code TEXT NOT NULL,
    error TEXT NOT NULL,
    kept_at TEXT NOT NULL,
    PRIMARY KEY (source_topic, source_partition, source_offset)
);
CREATE INDEX dead_letters_kept_at ON dead_letters (kept_at);
