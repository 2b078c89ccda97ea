# pginbox: everything a contributor runs. `make check` is what CI runs.

GO        ?= go
SQLC      := $(GO) tool -modfile=tools.mod sqlc
STATICCHECK := $(CURDIR)/bin/staticcheck
EACH      := bash scripts/each-module
FUZZTIME  ?= 15s

.PHONY: all demo generate test check fmt-check conflict-check vet staticcheck check-generated check-deps fuzz screenshots drills model-check model-defects model-mutants history-check

all: check

## demo: the main job: an orders scenario end to end, on an ephemeral PostgreSQL
## (or DATABASE_URL; DEMO_FLAGS=--migrate creates the schema there).
demo:
	$(GO) run ./cmd/inbox demo $(DEMO_FLAGS)

## generate: regenerate sqlc output and go:generate output (inboxgen).
generate:
	$(SQLC) generate
	$(GO) generate ./...

## screenshots: regenerate docs/console/*.png with headless Chromium (the
## console's browser test in console/browsertest).
screenshots:
	cd console/browsertest && INBOX_SCREENSHOT_DIR=$(CURDIR)/docs/console $(GO) test -count=1 -run '^(TestConsoleInBrowser|TestSkipInBrowser)$$' .

## test: the whole test suite with the race detector, in the root module and
## in every nested module (integrations with their own go.mod).
test:
	$(EACH) $(GO) test -race -count=1 ./...

## check: formatting, merge-conflict markers, vet, staticcheck, generated-code drift, dependency hygiene,
## the model's simulation (which installs Quint for internal/modeltest), the
## race-enabled tests and a short fuzz run.
check: fmt-check conflict-check vet staticcheck check-generated check-deps model-check test fuzz

## model-check: random simulation of the receipt protocol's Quint model
## (model/receipts.qnt) with every invariant checked after every step: MODEL_RUNS
## seeds x MODEL_SAMPLES traces x MODEL_STEPS steps. Needs node and npm (installs
## Quint from model/package-lock.json on first use).
model-check:
	bash scripts/model-check

## history-check: the history checks (internal/historycheck) for
## HISTORY_SECONDS (default 120) each: admin replays, reads and a purge, and
## worker claims, failures, handler transactions, recoveries, requeues, first
## accepts, redeliveries and purges, while sessions are killed and connections
## cut (and in two more runs, the server crashes once per epoch, or the
## workers run as processes killed with SIGKILL), checked for
## linearizability with porcupine; and the Worker runtime in processes killed
## with SIGKILL, its handler invocations checked against the invariants and
## each ordering key's order.
## make check runs them for 5 seconds with the other tests.
HISTORY_SECONDS ?= 120
history-check:
	cd internal/historycheck && HISTORY_SECONDS=$(HISTORY_SECONDS) $(GO) test -count=1 -v -timeout 30m -run '^Test(AdminHistory|WorkerHistory|WorkerHistoryServerCrash|WorkerHistoryKilledWorkers|WorkerRuntimeHistory|NotSentCallsDidNotCommit)$$' .

## model-defects: the model with a past fix switched off (scope keys, the
## hung-handler watchdog, the ordering keys' lock, the promotion in the
## handler's commit) must fail its invariants.
model-defects:
	bash scripts/model-defects

## model-mutants: the checks must catch broken SQL: in a scratch copy,
## ReceiptStart fenced by any token instead of the worker's, claims that take
## PROCESSING receipts whose lease runs, and claims that take BLOCKED receipts
## (ignoring the ordering keys' heads), each regenerated with sqlc, must each
## fail TestModelTraces or a history check; the unmutated copy must pass them
## all. About five minutes; part of `make drills`. MUTANTS_ALL=1 runs every
## check on every mutation instead of stopping at the first that fails.
model-mutants:
	bash scripts/model-mutants

## drills: the failure drills against real PostgreSQL clusters (restart,
## failover, tablespace full, WAL volume full, killed backends, connection
## flood, held xmin) and a Citus cluster (worker node killed or stopped,
## coordinator restarted, shard moved), about fifteen minutes, after
## model-mutants. `make check` runs only the drills' smoke versions. The
## disk-full drills mount a tmpfs: run as root.
DRILLS_TIMEOUT ?= 35m
drills: model-mutants
	PGINBOX_DRILLS=1 $(GO) test -race -count=1 -v -timeout $(DRILLS_TIMEOUT) -run '^TestDrill' ./drills/

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## conflict-check: fails on a merge-conflict marker left in any file.
conflict-check:
	bash scripts/check-conflicts

vet:
	$(EACH) $(GO) vet ./...

$(STATICCHECK): tools.mod tools.sum
	$(GO) build -modfile=tools.mod -o $@ honnef.co/go/tools/cmd/staticcheck

staticcheck: $(STATICCHECK)
	$(EACH) $(STATICCHECK) ./...

## check-generated: fails when committed generated code differs from a fresh run
## of its generators (stale extra files included).
check-generated:
	bash scripts/check-generated

## check-deps: a module importing pginbox must not inherit the build tools.
check-deps:
	bash scripts/check-deps

fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzCanonicalize$$' -fuzztime=$(FUZZTIME) ./internal/canonjson
	$(GO) test -run='^$$' -fuzz='^FuzzMessage$$' -fuzztime=$(FUZZTIME) ./inbox
