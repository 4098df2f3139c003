#!/usr/bin/env bash
# cargo-deny over the whole dependency graph (deny.toml; docs/security.md):
#
#   licenses, bans, sources   always: permissive licences only, crates.io only, no wildcards
#   advisories                the RustSec advisory database, when it can be had:
#                               CARGO_DENY_ADVISORY_DB=DIR  a git clone of the RustSec advisory-db
#                                                           (used offline), or else
#                               the network                 cargo-deny fetches it
#                             when neither works the check is SKIPPED and says so loudly;
#                             CARGO_DENY_REQUIRE_ADVISORIES=1 makes that a failure.
#
# First it proves that the gates can fail: the licence check against a policy without MIT, and
# the advisory check against a synthetic database with an advisory for a crate we use, must
# both fail. Installs cargo-deny into target/tools/cargo-deny when missing. Exits non-zero when
# any check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

version=0.20.2
tools="$root/target/tools"
bin="$tools/cargo-deny/bin/cargo-deny"
work="$tools/deny"

say() { printf '\n==> deny: %s\n' "$*"; }
fail() { printf 'deny: %s\n' "$*" >&2; exit 1; }

if ! "$bin" --version 2>/dev/null | grep -qx "cargo-deny $version"; then
  say "installing cargo-deny $version into target/tools/cargo-deny (from crates.io; a few minutes)"
  cargo install cargo-deny --version "$version" --locked --root "$tools/cargo-deny"
fi
export PATH="$tools/cargo-deny/bin:$PATH"
deny=(cargo deny --locked)
mkdir -p "$work"

# A copy of deny.toml whose advisory database lives under $1 (cargo-deny keeps each database
# in a directory named after its URL inside db-path).
config_with_db_path() {
  sed "/^\[advisories\]/a db-path = \"$1\"" deny.toml
}

# Puts the git repository $1 where cargo-deny looks for the advisory database of $2 (a config),
# and prints nothing; cargo-deny is asked for the directory name (it hashes the URL).
install_db() {
  local src=$1 config=$2 dbroot=$3 name
  rm -rf "$dbroot"
  mkdir -p "$dbroot"
  name=$("${deny[@]}" --offline --config "$config" check advisories 2>&1 | grep -o 'advisory-db-[0-9a-f]\{8,\}' | head -1 || true)
  [ -n "$name" ] || fail "could not learn where cargo-deny keeps the advisory database under $dbroot"
  git clone --quiet "$src" "$dbroot/$name"
}

# --- the gates can fail ------------------------------------------------------------------------
say "self-test: a licence policy without MIT must fail"
sed 's/^    "MIT",$//' deny.toml >"$work/deny-no-mit.toml"
if "${deny[@]}" --config "$work/deny-no-mit.toml" check --hide-inclusion-graph licenses >"$work/self-test.log" 2>&1; then
  cat "$work/self-test.log" >&2
  fail "the licence check passed without MIT allowed: it cannot fail"
fi
echo "  ok: refused"

say "self-test: a synthetic advisory for hex (a dependency) must fail the advisory check"
synthetic="$work/synthetic-advisory-db"
rm -rf "$synthetic"
mkdir -p "$synthetic/crates/hex"
cat >"$synthetic/crates/hex/RUSTSEC-2099-0001.md" <<'EOF'
```toml
[advisory]
id = "RUSTSEC-2099-0001"
package = "hex"
date = "2099-01-01"
url = "https://rustsec.org/"
categories = ["memory-corruption"]
keywords = []

[versions]
patched = [">= 99.0.0"]
```

# A synthetic advisory: scripts/deny.sh checks that the advisory check can fail

Not a real vulnerability.
EOF
git -C "$synthetic" init --quiet
git -C "$synthetic" add -A
git -C "$synthetic" -c user.name=deny.sh -c user.email=deny.sh@localhost commit --quiet -m "synthetic advisory"
config_with_db_path "$work/synthetic-dbs" >"$work/deny-synthetic.toml"
install_db "$synthetic" "$work/deny-synthetic.toml" "$work/synthetic-dbs"
if "${deny[@]}" --offline --config "$work/deny-synthetic.toml" check --hide-inclusion-graph advisories >"$work/self-test.log" 2>&1; then
  cat "$work/self-test.log" >&2
  fail "the advisory check passed with a synthetic advisory for hex: it cannot fail"
fi
grep -q 'RUSTSEC-2099-0001' "$work/self-test.log" || { cat "$work/self-test.log" >&2; fail "the synthetic advisory was not reported"; }
echo "  ok: refused (RUSTSEC-2099-0001)"

# --- licences, bans, sources -------------------------------------------------------------------
say "licenses, bans, sources"
if ! "${deny[@]}" check --hide-inclusion-graph licenses bans sources >"$work/check.log" 2>&1; then
  cat "$work/check.log" >&2
  fail "licenses, bans or sources failed (above)"
fi
tail -1 "$work/check.log"
dups=$(grep -c 'warning\[duplicate\]' "$work/check.log" || true)
echo "  ${dups} crate(s) in more than one version (warnings, not errors): $work/check.log"

# --- advisories --------------------------------------------------------------------------------
if [ -n "${CARGO_DENY_ADVISORY_DB:-}" ]; then
  db=$CARGO_DENY_ADVISORY_DB
  [ -d "$db/crates" ] || fail "CARGO_DENY_ADVISORY_DB=$db is not a clone of the RustSec advisory-db (no crates/)"
  git -C "$db" rev-parse --verify -q HEAD >/dev/null || fail "CARGO_DENY_ADVISORY_DB=$db is not a git repository"
  say "advisories: the RustSec database at $db (commit $(git -C "$db" rev-parse --short HEAD), $(git -C "$db" show -s --format=%cs HEAD))"
  config_with_db_path "$work/local-dbs" >"$work/deny-local.toml"
  install_db "$db" "$work/deny-local.toml" "$work/local-dbs"
  "${deny[@]}" --offline --config "$work/deny-local.toml" check --hide-inclusion-graph advisories
elif "${deny[@]}" fetch db >"$work/fetch.log" 2>&1; then
  say "advisories: the RustSec database, fetched"
  "${deny[@]}" check --hide-inclusion-graph advisories
else
  cat >&2 <<EOF

==> deny: advisories SKIPPED
    The RustSec advisory database could not be fetched ($(grep -o 'fatal: .*' "$work/fetch.log" | head -1 || echo "see $work/fetch.log"))
    and CARGO_DENY_ADVISORY_DB is not set: known vulnerabilities in the dependencies were NOT
    checked on this run. Set CARGO_DENY_ADVISORY_DB to a clone of the RustSec advisory-db, or
    run where the database can be fetched. (The advisory check itself passed its self-test.)
EOF
  if [ "${CARGO_DENY_REQUIRE_ADVISORIES:-0}" = 1 ]; then
    fail "CARGO_DENY_REQUIRE_ADVISORIES=1: the advisory check could not run"
  fi
  say "ok: licenses, bans, sources (advisories SKIPPED, see above)"
  exit 0
fi
say "ok: advisories, licenses, bans, sources"
