#!/usr/bin/env bash
# Which statement's server time grows during a load test (docs/capacity.md, "Which statement
# grows"). Needs pg_stat_statements: `shared_preload_libraries = 'pg_stat_statements'` on the
# server (a restart) and `CREATE EXTENSION pg_stat_statements` in the database.
#
#   scripts/statements-by-minute.sh sample DATABASE_URL DIR [SECONDS]
#       resets the database's statement counters, then every SECONDS (default 60) writes a
#       snapshot of them to DIR/NNN.tsv until interrupted (start it beside `load-agent loadtest`)
#   scripts/statements-by-minute.sh report DIR [TOP]
#       for the TOP (default 5) statements by total time, each interval's server time, time per
#       call, time per row and shared blocks per call (a statement whose time per row grows while
#       its blocks per call do not is paying more CPU or waits per row, not reading more)
set -euo pipefail

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

case "${1:-}" in
  sample)
    [ $# -ge 3 ] || usage
    url=$2 dir=$3 every=${4:-60}
    [[ $every =~ ^[1-9][0-9]*$ ]] || usage
    mkdir -p "$dir"
    psql "$url" -qAtc "SELECT pg_stat_statements_reset()" >/dev/null
    i=0
    while true; do
      psql "$url" -qAt -F $'\t' -c "
        SELECT queryid, calls, total_exec_time, rows, shared_blks_hit + shared_blks_read,
               left(regexp_replace(query, '\s+', ' ', 'g'), 100)
        FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())" \
        >"$dir/$(printf %03d "$i").tsv"
      i=$((i + 1))
      sleep "$every"
    done
    ;;
  report)
    [ $# -ge 2 ] || usage
    dir=$2 top=${3:-5}
    [[ $top =~ ^[1-9][0-9]*$ ]] || usage
    python3 - "$dir" "$top" <<'PY'
import glob, sys

directory, top = sys.argv[1], int(sys.argv[2])
snapshots = []
for path in sorted(glob.glob(f"{directory}/*.tsv")):
    snap = {}
    for line in open(path):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 6:
            continue
        qid, calls, ms, rows, blocks, text = fields[:6]
        snap[qid] = (int(calls), float(ms), int(rows), int(blocks), text)
    snapshots.append(snap)
if len(snapshots) < 2:
    sys.exit(f"{directory}: fewer than two snapshots")
last = snapshots[-1]
for qid in sorted(last, key=lambda q: -last[q][1])[:top]:
    print(last[qid][4])
    for n in range(1, len(snapshots)):
        a, b = snapshots[n].get(qid), snapshots[n - 1].get(qid, (0, 0.0, 0, 0, ""))
        if a is None or a[0] == b[0]:
            continue
        calls, ms, rows, blocks = a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3]
        print(f"  interval {n:3}: {ms / 1000:7.1f} s  {ms / calls:6.2f} ms/call  "
              f"{ms * 1000 / max(rows, 1):6.0f} us/row  {blocks / calls:6.0f} blocks/call")
PY
    ;;
  *) usage ;;
esac
