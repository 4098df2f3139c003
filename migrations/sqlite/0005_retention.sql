-- SQLite is not partitioned: postgres/0005_retention.sql has no SQLite counterpart. This file keeps
-- the two folders' numbering in step (migrations/README.md).
SELECT 1;
