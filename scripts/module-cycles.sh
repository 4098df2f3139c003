#!/usr/bin/env bash
# Module pairs that import each other inside one crate (issue 16): for every crate under
# crates/, lists the pairs of modules `a` <-> `b` where `a` names `b` through a `crate::` path
# (or a sibling's `super::` path) and `b` names `a` the same way. Exits 1 when it finds one.
# Run by scripts/test.sh.
#
# A module is a file under crates/<crate>/src (`foo.rs` and `foo/mod.rs` are `foo`,
# `foo/bar.rs` is `foo::bar`, lib.rs and main.rs the crate root). A `crate::` path names the
# longest module prefix it has (`use` groups `crate::{a::X, b::{c::Y}}` are expanded); a name the crate root or a module re-exports (`pub use
# x::{A, B}`) counts as the module it comes from. Not counted: lines starting with `//` (doc
# comments and comments), the crate root, and a module with its own ancestor or descendant (a
# parent and its submodules belong together). Inline `mod tests` count as their file.
# MC_DEBUG=1 also prints every edge (module -> module it names) on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

# Crate directories under crates/ this check skips (a name with no directory is ignored).
# None today: every crate is checked.
skip=()

found=0
for dir in crates/*/; do
  dir=${dir%/}
  crate=$(basename "$dir")
  [ -d "$dir/src" ] || continue
  for s in "${skip[@]}"; do [ "$crate" = "$s" ] && continue 2; done
  files=$(find "$dir/src" -name '*.rs' | sort)
  # shellcheck disable=SC2086
  pairs=$(awk -v src="$dir/src/" '
    function modof(path,   m) {
      m = substr(path, length(src) + 1)
      sub(/\.rs$/, "", m); sub(/(^|\/)mod$/, "", m)
      if (m == "lib" || m == "main") m = ""
      gsub(/\//, "::", m)
      return m
    }
    function parent(m) { if (m !~ /::/) return ""; sub(/::[^:]*$/, "", m); return m }
    function join(a, b) { return a == "" ? b : (b == "" ? a : a "::" b) }
    # The comma-separated items of a `{...}` group, top level only (nested groups kept whole).
    function split_group(s, out,   n, depth, i, c, cur) {
      n = 0; depth = 0; cur = ""
      for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "{") depth++
        if (c == "}") depth--
        if (c == "," && depth == 0) { out[++n] = cur; cur = "" } else cur = cur c
      }
      out[++n] = cur
      return n
    }
    # Expands a use tree (`a::b::{c, d::{e as f}}`) into full paths, one per line of EXPANDED.
    function expand(prefix, tree,   i, n, items, head, rest, k) {
      gsub(/^[ \t\n]+|[ \t\n]+$/, "", tree)
      if (tree == "") return
      i = index(tree, "{")
      if (i == 0) {
        sub(/[ \t\n]+as[ \t\n]+.*$/, "", tree)
        gsub(/[ \t\n]/, "", tree)
        expanded = expanded join(prefix, tree) "\n"
        return
      }
      head = substr(tree, 1, i - 1); gsub(/[ \t\n]|::$/, "", head)
      rest = substr(tree, i + 1); sub(/}[^}]*$/, "", rest)
      n = split_group(rest, items)
      for (k = 1; k <= n; k++) expand(join(prefix, head), items[k])
    }
    # The module an absolute path (without `crate::`) names: its longest module prefix, then
    # through the re-exports of that module.
    function target(path,   segs, n, m, k, next_m, hops) {
      n = split(path, segs, "::")
      m = ""
      for (k = 1; k <= n; k++) {
        next_m = join(m, segs[k])
        if (!(next_m in is_mod)) break
        m = next_m
      }
      for (hops = 0; k <= n && ((m SUBSEP segs[k]) in reexport) && hops < 8; hops++) {
        m = reexport[m SUBSEP segs[k]]
      }
      return m
    }
    # A use path relative to module M, made absolute (without `crate::`); "" if external.
    function absolute(m, path,   first) {
      first = path; sub(/::.*$/, "", first)
      if (first == "crate") return substr(path, 8)
      if (first == "self") return join(m, substr(path, 7))
      if (first == "super") return join(parent(m), substr(path, 8))
      if (join(m, first) in is_mod) return join(m, path)
      return ""
    }
    # Records an edge from module M to each module a path starting with KW names, KW standing
    # for module BASE.
    function scan(m, s, kw, base,   i, before, head, rest, depth, k, c, np, paths, t) {
      while ((i = index(s, kw)) > 0) {
        before = i > 1 ? substr(s, i - 1, 1) : " "
        s = substr(s, i + length(kw))
        if (before ~ /[A-Za-z0-9_$:]/) continue
        if (substr(s, 1, 1) == "{") { head = ""; rest = s }
        else if (match(s, /^[A-Za-z0-9_]+(::[A-Za-z0-9_]+)*(::\{)?/)) {
          head = substr(s, 1, RLENGTH); rest = ""
          if (head ~ /\{$/) { sub(/::\{$/, "", head); rest = substr(s, RLENGTH) }
        } else continue
        expanded = ""
        if (rest != "") {
          # The group up to its matching brace.
          depth = 0
          for (k = 1; k <= length(rest); k++) {
            c = substr(rest, k, 1)
            if (c == "{") depth++
            if (c == "}" && --depth == 0) break
          }
          expand(head, substr(rest, 1, k))
        } else expanded = head "\n"
        np = split(expanded, paths, "\n")
        for (k = 1; k <= np; k++) {
          if (paths[k] == "" || paths[k] ~ /^super(::|$)/) continue
          t = target(join(base, paths[k]))
          if (t == m || m == "" || is_ancestor(t, m) || is_ancestor(m, t)) continue
          edge[m SUBSEP t] = 1
        }
      }
    }
    function is_ancestor(a, b) { return a == "" || index(b, a "::") == 1 }
    BEGIN { RS = "\001" }
    FNR == 1 { m = modof(FILENAME); is_mod[m] = 1; nfiles++; fname[nfiles] = FILENAME; fmod[nfiles] = m }
    {
      # One record per file: drop the lines that start with `//`, keep the rest as code.
      n = split($0, lines, "\n"); code = ""
      for (i = 1; i <= n; i++) {
        if (lines[i] ~ /^[ \t]*\/\//) continue
        # An indented `use super::` belongs to an inline module (`mod tests`): its super is this file.
        if (lines[i] ~ /^[ \t]+use[ \t]+super::/) sub(/super::/, "self::", lines[i])
        code = code lines[i] "\n"
      }
      text[FILENAME] = code
    }
    END {
      # Re-exports first (`pub use` and `pub(...) use`, single or grouped).
      for (f = 1; f <= nfiles; f++) {
        m = fmod[f]; s = text[fname[f]]
        nst = split(s, stmts, ";")
        for (j = 1; j <= nst; j++) {
          st = stmts[j]
          if (st !~ /(^|[^A-Za-z0-9_])pub(\([^)]*\))?[ \t\n]+use[ \t\n]/) continue
          sub(/^.*pub(\([^)]*\))?[ \t\n]+use[ \t\n]+/, "", st)
          expanded = ""; expand("", st)
          np = split(expanded, paths, "\n")
          for (k = 1; k <= np; k++) {
            if (paths[k] == "" || paths[k] ~ /\*$/) continue
            name = paths[k]; sub(/^.*::/, "", name)
            abs = absolute(m, paths[k])
            if (abs == "") continue
            t = target(abs)
            if (t != m) reexport[m SUBSEP name] = t
          }
        }
      }
      # Then every `crate::`, `super::` and `self::` path of every file.
      for (f = 1; f <= nfiles; f++) {
        m = fmod[f]
        scan(m, text[fname[f]], "crate::", "")
        scan(m, text[fname[f]], "super::", parent(m))
        scan(m, text[fname[f]], "self::", m)
      }
      if (ENVIRON["MC_DEBUG"] != "") for (e in edge) { split(e, ab, SUBSEP); print "edge " ab[1] " -> " ab[2] > "/dev/stderr" }
      for (e in edge) {
        split(e, ab, SUBSEP)
        if (ab[1] < ab[2] && ((ab[2] SUBSEP ab[1]) in edge)) print ab[1] " <-> " ab[2]
      }
    }
  ' $files | sort)
  if [ -n "$pairs" ]; then
    found=1
    while IFS= read -r pair; do echo "$crate: $pair"; done <<<"$pairs"
  fi
done

if [ "$found" = 1 ]; then
  echo "module-cycles: the module pairs above import each other; move what they share to the module that owns it or to a small module both use" >&2
  exit 1
fi
echo "module-cycles: no module pair imports each other"
