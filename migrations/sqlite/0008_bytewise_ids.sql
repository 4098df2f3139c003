-- SQLite compares text bytewise already (its BINARY collation): postgres/0008_bytewise_ids.sql
-- has no SQLite counterpart. This file keeps the two folders' numbering in step
-- (migrations/README.md).
SELECT 1;
