# pginbox: everything a contributor runs. `make check` is what CI runs.

GO        ?= go
# tools.mod is read with -modfile, which the go command refuses in workspace
# mode (go.work): the build tools run outside it.
GOTOOL    := GOWORK=off $(GO)
SQLC      := $(GOTOOL) tool -modfile=tools.mod sqlc
STATICCHECK := $(CURDIR)/bin/staticcheck
EACH      := bash scripts/each-module
FUZZTIME  ?= 15s

.PHONY: all demo generate test check fmt-check conflict-check vet staticcheck check-generated check-deps check-doc check-api check-release fuzz screenshots drills model-check model-defects model-mutants history-check work tidy release

all: check

## demo: the main job: an orders scenario end to end, on an ephemeral PostgreSQL
## (or DATABASE_URL; DEMO_FLAGS=--migrate creates the schema there).
demo:
	$(GO) run ./cmd/inbox demo $(DEMO_FLAGS)

## generate: regenerate sqlc output and go:generate output (inboxgen).
generate:
	$(SQLC) generate
	$(GOTOOL) generate ./...

## screenshots: regenerate docs/console/*.png with headless Chromium (the
## console's browser test in console/browsertest).
screenshots:
	cd console/browsertest && INBOX_SCREENSHOT_DIR=$(CURDIR)/docs/console $(GO) test -count=1 -run '^(TestConsoleInBrowser|TestSkipInBrowser)$$' .

## test: the whole test suite with the race detector, in the root module and
## in every nested module (integrations with their own go.mod).
test:
	$(EACH) $(GO) test -race -count=1 ./...

## check: formatting, merge-conflict markers, vet, staticcheck, generated-code
## drift, dependency hygiene, doc comments, API compatibility, the release
## fetched through a module proxy, the model's simulation (which installs
## Quint for internal/modeltest), the race-enabled tests and a short fuzz run.
check: fmt-check conflict-check vet staticcheck check-generated check-deps check-doc check-api check-release model-check test fuzz

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
	$(GOTOOL) build -modfile=tools.mod -o $@ honnef.co/go/tools/cmd/staticcheck

staticcheck: $(STATICCHECK)
	$(EACH) $(STATICCHECK) ./...

## check-generated: fails when committed generated code differs from a fresh run
## of its generators (stale extra files included).
check-generated:
	bash scripts/check-generated

## check-deps: a module importing pginbox must not inherit the build tools.
check-deps:
	bash scripts/check-deps

## check-doc: every exported identifier of every module has a doc comment
## (generated files exempt): internal/cmd/doccheck.
check-doc:
	$(GO) run ./internal/cmd/doccheck

## check-api: apidiff against each module's latest vX.Y.Z tag; an incompatible
## change fails unless CHANGELOG.md's Unreleased section announces it under
## "### Breaking" (RELEASING.md). Passes with a note while no tag exists.
check-api:
	bash scripts/check-api

## check-release: every module at the version being prepared, served by a
## file-based module proxy built from the tree, fetched by `go get` into a
## scratch module (no go.work, no replace), built, tested and installed; and
## go.work and the go.mod files in step (RELEASING.md).
check-release:
	bash scripts/check-release

## work: rewrite go.work and the requirements between the repository's modules
## after adding, moving or removing a nested module.
work:
	$(GOTOOL) run -C internal/releasetool . -C $(CURDIR) set

## tidy: go mod tidy in every module (a plain one in a nested module asks the
## module proxy for the unreleased version and fails).
tidy:
	$(GOTOOL) run -C internal/releasetool . -C $(CURDIR) tidy

## release: the release procedure of RELEASING.md. A dry run by default:
## `make release VERSION=v0.1.0`; RELEASE_FLAGS=--write sets the version in the
## go.mod files, RELEASE_FLAGS=--tag creates the tags (never pushed).
release:
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=vX.Y.Z [RELEASE_FLAGS=--write|--tag]"; exit 2; }
	bash scripts/release $(RELEASE_FLAGS) $(VERSION)

fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzCanonicalize$$' -fuzztime=$(FUZZTIME) ./internal/canonjson
	$(GO) test -run='^$$' -fuzz='^FuzzMessage$$' -fuzztime=$(FUZZTIME) ./inbox
