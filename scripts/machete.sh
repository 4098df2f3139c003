#!/usr/bin/env bash
# Unused dependencies: cargo-machete over every crate of the workspace (and benches). Installs
# cargo-machete into target/tools/cargo-machete when missing. Exits non-zero when a crate declares
# a dependency it does not use.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.9.2
tools=target/tools/cargo-machete
bin="$tools/bin/cargo-machete"
if ! "$bin" --version 2>/dev/null | grep -qx "$version"; then
  echo "installing cargo-machete $version into $tools (from crates.io)"
  cargo install cargo-machete --version "$version" --locked --root "$tools" --quiet
fi
"$bin"
