#!/bin/sh
# The first `make run` of a fresh clone with an empty Go build cache (modules already downloaded), once
# linking the system's SQLite (SQLITE=system, when libsqlite3-dev is there) and once compiling
# go-sqlite3's amalgamation (SQLITE=bundled), side by side in one run. Prints seconds; asserts nothing.
# Usage: bench/coldbuild.sh [build]   ("build": time `make build` only, not the sweep)
set -eu
cd "$(dirname "$0")/.."
target=${1:-run}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q . "$tmp/src"
go mod download
variants="bundled"
if [ "$(make -s -C "$tmp/src" --eval 'which-sqlite: ; @echo $(SQLITE)' which-sqlite)" = system ]; then
	variants="system bundled"
fi
for v in $variants; do
	mkdir -p "$tmp/cache-$v"
	start=$(date +%s%N)
	GOCACHE="$tmp/cache-$v" make -s -C "$tmp/src" "$target" SQLITE="$v" DB="$tmp/$v.db" >"$tmp/$v.log" 2>&1 ||
		{ cat "$tmp/$v.log"; exit 1; }
	end=$(date +%s%N)
	ms=$(( (end - start) / 1000000 ))
	printf 'cold make %s, SQLITE=%s: %d.%d s\n' "$target" "$v" $((ms / 1000)) $((ms % 1000 / 100))
	rm -rf "$tmp/cache-$v"
done
