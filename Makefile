# specsweep: make run (a sweep of the quickstart spec), make test (everything CI runs).
GO        ?= go
BIN       ?= bin
DB        ?= specsweep.db
QUICKSTART = examples/quickstart.yaml
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS    = -X github.com/specsweep/specsweep/internal/cli.version=$(VERSION)
TESTFLAGS ?= -count=1 -timeout 60m -p 3
# go test starts packages in the order given, -p at a time: the longest first (internal/e2e, hostctl,
# internal/testhost), the short ones beside them; in path order, two at a time, the short ones ran
# alone at the end, the cores 40% busy (docs/development.md, "Tests").
TESTPKGS  ?= ./internal/e2e ./hostctl ./internal/testhost ./...

# SQLite: link the system's library when its headers are there (Debian's libsqlite3-dev) and it is new
# enough for the store (3.33: sqlite_schema; store's TestLinkedSQLite checks every feature it uses),
# which skips compiling SQLite's C amalgamation (about a minute of cgo on 2 cores, once per build
# cache). Otherwise go-sqlite3 compiles the amalgamation. SQLITE=bundled forces the amalgamation (a
# binary that needs no libsqlite3 where it is installed); SQLITE=system insists on the library.
SQLITE_PROBE = printf '\043include <sqlite3.h>\n\043if SQLITE_VERSION_NUMBER < 3033000\n\043error old\n\043endif\nint main(void){return sqlite3_libversion_number() < 3033000;}\n' | $(CC) -x c - -lsqlite3 -o /dev/null >/dev/null 2>&1
SQLITE ?= $(shell $(SQLITE_PROBE) && echo system || echo bundled)
ifeq ($(SQLITE),system)
export GOFLAGS := $(strip $(GOFLAGS) -tags=libsqlite3)
else ifneq ($(SQLITE),bundled)
$(error SQLITE=$(SQLITE): want system or bundled)
endif

# staticcheck, pinned (release 2026.2.2, the latest when pinned; it supports go 1.26). make tools
# installs it where go install puts binaries; make lint takes the one on PATH, else that one.
STATICCHECK_VERSION = v0.8.2
TOOLBIN      = $(or $(shell $(GO) env GOBIN),$(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin)
STATICCHECK ?= $(or $(shell command -v staticcheck 2>/dev/null),$(TOOLBIN)/staticcheck)

.PHONY: all build sqlite-note run test test-short unit gofmt-check lint tools bench fuzz clean

all: build

# One go build for both binaries: the packages they share compile once, the rest side by side.
build: sqlite-note
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/specsweep ./cmd/sglangsim

# Says, on a cold build cache only, what the slow part of the first build is and how to skip it.
sqlite-note:
	@if [ "$$($(GO) list -f '{{.Stale}}' github.com/mattn/go-sqlite3 2>/dev/null)" = true ]; then \
		if [ '$(SQLITE)' = system ]; then echo "first build: linking the system's SQLite (libsqlite3-dev)"; \
		else echo "first build: compiling SQLite's C amalgamation (go-sqlite3, cgo; about a minute on 2 cores, once)." \
			"Install libsqlite3-dev to link the system's SQLite instead."; fi; \
	fi

# The main job on the embedded default spec: a real sweep of sglangsim child processes. Running it
# again shows the finished sweep's results; RUNFLAGS=--new starts another one.
RUNFLAGS ?=
run: build
	$(BIN)/specsweep run --db $(DB) $(RUNFLAGS) $(QUICKSTART)

# Unit and integration tests: everything CI runs (integration tests need root; CI is root).
# One build of specsweep and sglangsim for every test package (testhost.BinDirEnv), in a directory
# of this run's own, removed after it: each test process built its own before.
test: lint
	@bindir=$$(mktemp -d "$${TMPDIR:-/tmp}/sst-testbin-XXXXXX") && trap 'rm -rf "$$bindir"' EXIT INT TERM && \
	echo "$(GO) build -o $$bindir/ ./cmd/specsweep ./cmd/sglangsim" && \
	$(GO) build -o "$$bindir/" ./cmd/specsweep ./cmd/sglangsim && \
	echo "SPECSWEEP_TEST_BINDIR=$$bindir $(GO) test $(TESTFLAGS) $(TESTPKGS)" && \
	SPECSWEEP_TEST_BINDIR="$$bindir" $(GO) test $(TESTFLAGS) $(TESTPKGS)

# The inner loop: lint's fast parts (the gofmt check, go vet), then the fast tests (-short: no test
# hosts, no end-to-end sweeps, no recorded sweeps). unit is its old name.
test-short: gofmt-check
	$(GO) vet ./...
	$(GO) test -short -count=1 ./...

unit: test-short

gofmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: gofmt-check
	$(GO) vet ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@[ -x "$(STATICCHECK)" ] || { echo "staticcheck not found: installing $(STATICCHECK_VERSION)"; $(MAKE) --no-print-directory tools; }
	$(STATICCHECK) ./...

# Installs staticcheck $(STATICCHECK_VERSION) unless that version, built by this Go, is already there.
tools:
	@bin='$(TOOLBIN)/staticcheck'; m=$$($(GO) version -m "$$bin" 2>/dev/null); \
	if printf '%s\n' "$$m" | head -1 | grep -qF ": $$($(GO) env GOVERSION)" && \
	   printf '%s\n' "$$m" | grep -qE '^\s+mod\s+honnef\.co/go/tools\s+$(STATICCHECK_VERSION)\s'; then \
		echo "staticcheck $(STATICCHECK_VERSION) is in $$bin"; \
	else \
		echo "installing staticcheck $(STATICCHECK_VERSION) in $$bin"; \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi

# Benchmarks print their figures; see docs/benchmarks.md.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	@for s in bench/*.sh; do [ -x "$$s" ] && { echo "== $$s"; "$$s"; }; done; true

# One target per run (-fuzz must match exactly one): the spec parser, the cron helper, the search, the journal reader, ExecStart quoting, the simulator's profile files, sbatch_args, the SSE reader, prompt JSON text, the prompt set files, the argv reader, a conversation's request body, the simulator's content score.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 60s ./sweep
	$(GO) test -run '^$$' -fuzz '^FuzzParseCron$$' -fuzztime 60s ./sweep
	$(GO) test -run '^$$' -fuzz '^FuzzDecide$$' -fuzztime 60s ./sweep
	$(GO) test -run '^$$' -fuzz '^FuzzParseJournal$$' -fuzztime 60s ./hostctl
	$(GO) test -run '^$$' -fuzz '^FuzzExecStart$$' -fuzztime 60s ./hostctl
	$(GO) test -run '^$$' -fuzz '^FuzzParseProfile$$' -fuzztime 60s ./sim
	$(GO) test -run '^$$' -fuzz '^FuzzSbatchArg$$' -fuzztime 60s ./sweep
	$(GO) test -run '^$$' -fuzz '^FuzzSSE$$' -fuzztime 60s ./workload
	$(GO) test -run '^$$' -fuzz '^FuzzJSONText$$' -fuzztime 60s ./workload
	$(GO) test -run '^$$' -fuzz '^FuzzReadPromptSet$$' -fuzztime 60s ./workload
	$(GO) test -run '^$$' -fuzz '^FuzzLast$$' -fuzztime 60s ./internal/argparse
	$(GO) test -run '^$$' -fuzz '^FuzzConversationBody$$' -fuzztime 60s ./workload
	$(GO) test -run '^$$' -fuzz '^FuzzContentScore$$' -fuzztime 60s ./sim

clean:
	rm -rf $(BIN)
