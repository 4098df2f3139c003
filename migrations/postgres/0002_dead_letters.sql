-- Bodies of dead letters the DLQ topic cannot hold as they are (crates/store/src/dead_letters.rs):
-- the DLQ record is written reduced and names its row here by source topic/partition/offset.
CREATE TABLE dead_letters (
    source_topic text NOT NULL,
    source_partition integer NOT NULL,
    source_offset bigint NOT NULL,
    record_key bytea,
    headers bytea NOT NULL,
    value bytea,
    error_code text NOT NULL,
    error text NOT NULL,
    kept_at timestamptz NOT NULL,
    PRIMARY KEY (source_topic, source_partition, source_offset)
);
CREATE INDEX dead_letters_kept_at ON dead_letters (kept_at);
