# specsweep: make run (a sweep of the quickstart spec), make test (everything CI runs).
GO        ?= go
BIN       ?= bin
DB        ?= specsweep.db
QUICKSTART = examples/quickstart.yaml
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS    = -X github.com/specsweep/specsweep/internal/cli.version=$(VERSION)
TESTFLAGS ?= -count=1 -timeout 30m

.PHONY: all build run test unit lint bench fuzz clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/specsweep ./cmd/specsweep
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/sglangsim ./cmd/sglangsim

# The main job on the embedded default spec: a real sweep of sglangsim child processes. Running it
# again shows the finished sweep's results; RUNFLAGS=--new starts another one.
RUNFLAGS ?=
run: build
	$(BIN)/specsweep run --db $(DB) $(RUNFLAGS) $(QUICKSTART)

# Unit and integration tests: everything CI runs (integration tests need root; CI is root).
test: lint
	$(GO) test $(TESTFLAGS) ./...

# Fast tests only.
unit:
	$(GO) test -short -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Benchmarks print their figures; see docs/benchmarks.md.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	@for s in bench/*.sh; do [ -x "$$s" ] && { echo "== $$s"; "$$s"; }; done; true

# One target per run (-fuzz must match exactly one): the spec parser, the cron helper, the search, the journal reader, ExecStart quoting, the simulator's profile files, sbatch_args, the SSE reader, prompt JSON text, the argv reader.
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
	$(GO) test -run '^$$' -fuzz '^FuzzLast$$' -fuzztime 60s ./internal/argparse

clean:
	rm -rf $(BIN)
