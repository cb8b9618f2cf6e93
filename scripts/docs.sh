#!/usr/bin/env bash
# `make docs`: the DocC reference of every library product of the root package, built with the toolchain's
# own docc (no package plugin, no dependency added).
#
# 1. The package is built with its tests, as `make test` builds it (one build shared by both, whichever runs
#    first): `swift package dump-symbol-graph` also extracts the graphs of the test runner's modules, and
#    fails on a fresh clone where they were never built. It then writes the public symbol graph of every
#    library target.
# 2. Every library product's target must have a catalog, Sources/<Target>/<Target>.docc; for each, `docc
#    convert` reads the catalog and that module's symbol graphs only, with --warnings-as-errors, so a broken
#    ``Symbol`` link or an invalid doc comment fails the run (every target is converted first, then the run
#    fails naming the targets that did not convert).
# 3. The archives, in .build/docs/<Target>.doccarchive, are transformed for static hosting; `docc merge`
#    combines them into one site, .build/docs/offline-sync.doccarchive, with a landing page listing them.
#
# Environment: SWIFT (default swift), DOCC (default: the docc beside the swift on PATH, else docc on PATH).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
started=$(date +%s)

swift_bin="${SWIFT:-swift}"
if [ -z "${DOCC:-}" ]; then
    beside="$(dirname "$(readlink -f "$(command -v "$swift_bin")")")/docc"
    if [ -x "$beside" ]; then
        DOCC="$beside"
    elif command -v xcrun >/dev/null 2>&1 && xcrun --find docc >/dev/null 2>&1; then
        DOCC="$(xcrun --find docc)"
    else
        DOCC=docc
    fi
fi
command -v "$DOCC" >/dev/null 2>&1 || { echo "docs: no docc (set DOCC to the toolchain's docc)" >&2; exit 1; }

out="$root/.build/docs"
graphs="$out/symbol-graphs"
rm -rf "$out"
mkdir -p "$graphs"

# The library products' targets, from the manifest.
targets=$("$swift_bin" package dump-package | python3 -c '
import json, sys
package = json.load(sys.stdin)
names = []
for product in package["products"]:
    if "library" in product["type"]:
        names += [t for t in product["targets"] if t not in names]
print("\n".join(names))')

# Where each target's sources are: its catalog goes there.
catalogs=()
missing=()
for target in $targets; do
    catalog=$(find Packages -path "*/Sources/$target/$target.docc" -type d | head -1)
    if [ -z "$catalog" ]; then
        missing+=("$target")
    else
        catalogs+=("$catalog")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "docs: no catalog Packages/<Package>/Sources/<Target>/<Target>.docc for: ${missing[*]}" >&2
    exit 1
fi
# Catalogs document library products only: none in a test target.
stray=$(find Packages Apps Tests Benchmarks \( -path 'Tests/*' -o -path '*/Tests/*' \) -name '*.docc' -type d 2>/dev/null || true)
if [ -n "$stray" ]; then
    echo "docs: documentation catalogs in test targets: $stray" >&2
    exit 1
fi

echo "== symbol graphs (swift package dump-symbol-graph)"
# Extension blocks: members that a module adds to another module's types (String, JSONReader, FugueList…)
# are documented on the module's page under "Extended Modules".
dump_log="$out/dump-symbol-graph.log"
# The same debug build as `make test` (SYNC_BUILD_FLAGS, with the tests), so that after it only the symbol
# graphs are new, and before it `make test` has only the tests to run.
# shellcheck disable=SC2086 # the flags are words
if ! "$swift_bin" build --build-tests ${SYNC_BUILD_FLAGS--debug-info-format none} >"$dump_log" 2>&1; then
    tail -40 "$dump_log" >&2
    echo "docs: swift build --build-tests failed (whole output in $dump_log)" >&2
    exit 1
fi
# shellcheck disable=SC2086 # the flags are words
if ! "$swift_bin" package ${SYNC_BUILD_FLAGS--debug-info-format none} dump-symbol-graph --minimum-access-level public --emit-extension-block-symbols \
    >>"$dump_log" 2>&1; then
    tail -40 "$dump_log" >&2
    echo "docs: swift package dump-symbol-graph failed (whole output in $dump_log)" >&2
    exit 1
fi
# "Files written to <folder>": the symbol graphs of every module, <Module>.symbols.json and
# <Module>@<ExtendedModule>.symbols.json (one folder, .build/<triple>/symbolgraph; the `find` below would
# also find them in a folder per module).
dumped=$(sed -n 's/^Files written to //p' "$dump_log" | tail -1)
if [ -z "$dumped" ] || [ ! -d "$dumped" ]; then
    tail -20 "$dump_log" >&2
    echo "docs: cannot find where dump-symbol-graph wrote the symbol graphs (see $dump_log)" >&2
    exit 1
fi
echo "   $(grep -c '^-- Emitting symbol graph' "$dump_log") modules in $dumped, $(($(date +%s) - started)) s"

failed=()
for catalog in "${catalogs[@]}"; do
    target=$(basename "$catalog" .docc)
    mkdir -p "$graphs/$target"
    find "$dumped" -type f \( -name "$target.symbols.json" -o -name "$target@*.symbols.json" \) \
        -exec cp {} "$graphs/$target/" \;
    if [ ! -f "$graphs/$target/$target.symbols.json" ]; then
        echo "docs: no symbol graph for $target in $dumped" >&2
        failed+=("$target")
        continue
    fi
    echo "== $target ($catalog)"
    if ! "$DOCC" convert "$catalog" \
        --additional-symbol-graph-dir "$graphs/$target" \
        --fallback-display-name "$target" \
        --fallback-bundle-identifier "offline-sync.$target" \
        --fallback-default-module-kind Library \
        --output-path "$out/$target.doccarchive" \
        --transform-for-static-hosting \
        --warnings-as-errors 2>&1 | sed '/^$/d'; then
        failed+=("$target")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "docs: docc failed for ${failed[*]} (warnings are errors: fix the links and doc comments it names)" >&2
    exit 1
fi

echo "== one site for all of them (docc merge)"
archives=()
for catalog in "${catalogs[@]}"; do archives+=("$out/$(basename "$catalog" .docc).doccarchive"); done
"$DOCC" merge "${archives[@]}" --synthesized-landing-page-name offline-sync \
    --synthesized-landing-page-kind Package --output-path "$out/offline-sync.doccarchive"

echo
echo "docs: ${#catalogs[@]} archives in $out/<Target>.doccarchive, all of them in $out/offline-sync.doccarchive"
echo "docs: view them with: python3 -m http.server --directory $out/offline-sync.doccarchive 8000"
echo "docs:   then open http://127.0.0.1:8000/documentation/"
echo "docs: done in $(($(date +%s) - started)) s"
