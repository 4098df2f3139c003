-- SQLite is not partitioned: postgres/0007_filled_partition_statistics.sql has no SQLite
-- counterpart. This file keeps the two folders' numbering in step (migrations/README.md).
SELECT 1;
