-- SQLite is not partitioned: postgres/0006_outbox_retired.sql has no SQLite counterpart. This file
-- keeps the two folders' numbering in step (migrations/README.md).
SELECT 1;
