package inbox_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// lazyPool is a pool that never connects: constructors must not need the
// database.
func lazyPool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig("host=/nonexistent dbname=none")
	if err != nil {
		t.Fatal(err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func requireConfigError(t *testing.T, err error, field string) {
	t.Helper()
	var ce *inbox.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, inbox.ErrInvalidConfig) {
		t.Fatalf("want a *ConfigError for %s, got %v", field, err)
	}
	if ce.Field != field {
		t.Fatalf("ConfigError.Field = %q, want %q (%v)", ce.Field, field, err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		field    string
		cfg      inbox.Config
		maxConns int32  // the pool's; 0 for pgxpool's default, max(4, CPUs)
		says     string // in the message, when set
	}{
		{field: "Config.MaxAttempts", cfg: inbox.Config{MaxAttempts: -1}},
		{field: "Config.MaxAttempts", cfg: inbox.Config{MaxAttempts: 1 << 32}},   // int32() would store 0
		{field: "Config.MaxAttempts", cfg: inbox.Config{MaxAttempts: 1<<32 + 1}}, // int32() would store 1
		{field: "Config.MaxPayloadDepth", cfg: inbox.Config{MaxPayloadDepth: -5}},
		{field: "Config.MaxPayloadBytes", cfg: inbox.Config{MaxPayloadBytes: 1 << 40}},
		{field: "Config.MaxMetadataBytes", cfg: inbox.Config{MaxMetadataBytes: -1}},
		{field: "Config.MaxMetadataBytes", cfg: inbox.Config{MaxMetadataBytes: inbox.MaxMetadataBytesLimit + 1}},
		{field: "Config.GroupCommitMaxBatch", cfg: inbox.Config{GroupCommitMaxBatch: -1}},
		{field: "Config.GroupCommitFlushers", cfg: inbox.Config{GroupCommitFlushers: -1}},
		{field: "Config.GroupCommitMaxWait", cfg: inbox.Config{GroupCommitMaxWait: -time.Second}},
		// Each flusher holds a connection of its own.
		{field: "Config.GroupCommitFlushers", cfg: inbox.Config{GroupCommit: true, GroupCommitFlushers: 5}, maxConns: 4, says: "pool MaxConns 4"},
		{field: "Config.Consumers", cfg: inbox.Config{Consumers: []string{"ok", "bad\nname"}}, says: `"bad\nname"`},
		{field: "Config.Consumers", cfg: inbox.Config{Consumers: []string{"ok", ""}}, says: "entry 1 is empty"},
	} {
		t.Run(fmt.Sprint(i, " ", tc.field), func(t *testing.T) {
			_, err := inbox.NewClient(lazyPool(t, tc.maxConns), tc.cfg)
			requireConfigError(t, err, tc.field)
			requireSays(t, err, tc.says)
		})
	}
	for _, cfg := range []inbox.Config{
		{MaxAttempts: inbox.MaxMaxAttempts},
		{MaxMetadataBytes: inbox.MaxMetadataBytesLimit},
		{GroupCommit: true, GroupCommitFlushers: 4},
		{GroupCommitFlushers: 5}, // no group commit: no flushers
	} {
		if _, err := inbox.NewClient(lazyPool(t, 4), cfg); err != nil {
			t.Errorf("%+v on a 4-connection pool: %v", cfg, err)
		}
	}
}

// requireSays checks a refusal's message: it holds says, and the package's
// prefix once.
func requireSays(t *testing.T, err error, says string) {
	t.Helper()
	if err == nil {
		return // requireConfigError said so
	}
	if !strings.Contains(err.Error(), says) {
		t.Errorf("%q does not say %q", err, says)
	}
	if n := strings.Count(err.Error(), "pginbox:"); n != 1 {
		t.Errorf("%q has the prefix pginbox: %d times", err, n)
	}
}

func TestWorkerConfigValidation(t *testing.T) {
	t.Parallel()
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "c", EventType: "e", SchemaVersion: 1},
		func(context.Context, *handler.Msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		field      string
		cfg        inbox.WorkerConfig
		maxConns   int32 // the worker's pool; 0 for 50
		sysConns   int32 // a SystemPool of this size, when set
		says       string
		mustNotSay string
		reg        *handler.Registry // nil for one handler of consumer "c"
	}{
		{field: "WorkerConfig.Concurrency", cfg: inbox.WorkerConfig{Concurrency: -1}},
		{field: "WorkerConfig.ClaimBatch", cfg: inbox.WorkerConfig{ClaimBatch: -1}},
		{field: "WorkerConfig.MessagesPerTx", cfg: inbox.WorkerConfig{MessagesPerTx: inbox.MaxMessagesPerTx + 1}},
		{field: "WorkerConfig.PollInterval", cfg: inbox.WorkerConfig{PollInterval: -time.Second}},
		{field: "WorkerConfig.Lease", cfg: inbox.WorkerConfig{Lease: -time.Second}},
		{field: "WorkerConfig.Lease", cfg: inbox.WorkerConfig{Lease: time.Millisecond}},
		{field: "WorkerConfig.HeartbeatInterval", cfg: inbox.WorkerConfig{HeartbeatInterval: -1}},
		{field: "WorkerConfig.HeartbeatInterval", cfg: inbox.WorkerConfig{Lease: 3 * time.Second, HeartbeatInterval: 3 * time.Second}},
		{field: "WorkerConfig.HeartbeatInterval", cfg: inbox.WorkerConfig{HeartbeatInterval: inbox.DefaultLease}},
		{field: "WorkerConfig.RecoverInterval", cfg: inbox.WorkerConfig{RecoverInterval: -1}},
		{field: "WorkerConfig.HandlerTimeout", cfg: inbox.WorkerConfig{HandlerTimeout: -1}},
		{field: "WorkerConfig.HandlerTimeout", cfg: inbox.WorkerConfig{HandlerTimeout: 30 * 24 * time.Hour}},
		{field: "WorkerConfig.ShutdownGrace", cfg: inbox.WorkerConfig{ShutdownGrace: -1}},

		// The pool: Concurrency handlers, the listener unless PollOnly, and one
		// for claims, heartbeats and recovery.
		{field: "WorkerConfig.Concurrency", cfg: inbox.WorkerConfig{Concurrency: 10}, maxConns: 4,
			says: "pool MaxConns 4 is below Concurrency 10 + 2 (listener, claims and heartbeats)"},
		{field: "WorkerConfig.Concurrency", cfg: inbox.WorkerConfig{Concurrency: 4, PollOnly: true}, maxConns: 4,
			says: "pool MaxConns 4 is below Concurrency 4 + 1 (claims and heartbeats)", mustNotSay: "listener"},
		{field: "pgxpool.Config.MaxConns", cfg: inbox.WorkerConfig{}, maxConns: 2, says: "raise pool_max_conns to at least 3"},
		{field: "pgxpool.Config.MaxConns", cfg: inbox.WorkerConfig{PollOnly: true}, maxConns: 1, says: "raise pool_max_conns to at least 2", mustNotSay: "listener"},
		// With a SystemPool, the listener and the bookkeeping are there; the
		// worker's pool keeps one connection to end a hung handler's session.
		{field: "WorkerConfig.Concurrency", cfg: inbox.WorkerConfig{Concurrency: 4}, maxConns: 4, sysConns: 2,
			says: "pool MaxConns 4 is below Concurrency 4 + 1 (ending a hung handler's session)", mustNotSay: "listener"},
		{field: "WorkerConfig.SystemPool", cfg: inbox.WorkerConfig{}, sysConns: 1, says: "MaxConns 1 is below 2 (listener, claims and heartbeats)"},

		// Consumers: named like identities, each with a handler.
		{field: "WorkerConfig.Consumers", cfg: inbox.WorkerConfig{Consumers: []string{"c", ""}}, says: "entry 1 is empty", mustNotSay: "handler"},
		{field: "WorkerConfig.Consumers", cfg: inbox.WorkerConfig{Consumers: []string{"c\x1b[2J"}}, says: `"c\x1b[2J"`},
		{field: "WorkerConfig.Consumers", cfg: inbox.WorkerConfig{Consumers: []string{"c", "billing.v1"}}, says: `"billing.v1" is owned by this worker but has no handler`},
		{field: "WorkerConfig.Consumers", cfg: inbox.WorkerConfig{}, reg: handler.NewRegistry(), says: "no consumers to own"},
	} {
		t.Run(fmt.Sprint(i, " ", tc.field), func(t *testing.T) {
			pool := lazyPool(t, cmp.Or(tc.maxConns, 50))
			if tc.sysConns > 0 {
				tc.cfg.SystemPool = lazyPool(t, tc.sysConns)
			}
			_, err := inbox.NewWorker(pool, cmp.Or(tc.reg, reg), tc.cfg)
			requireConfigError(t, err, tc.field)
			requireSays(t, err, tc.says)
			if tc.mustNotSay != "" && strings.Contains(err.Error(), tc.mustNotSay) {
				t.Errorf("%q says %q", err, tc.mustNotSay)
			}
		})
	}
}

// The pools a worker needs, as WorkerConfig documents them.
func TestWorkerPoolSizing(t *testing.T) {
	t.Parallel()
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "c", EventType: "e", SchemaVersion: 1},
		func(context.Context, *handler.Msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cfg      inbox.WorkerConfig
		maxConns int32
		sysConns int32
	}{
		{"default Concurrency on a default pool", inbox.WorkerConfig{}, 4, 0},
		{"Concurrency + 2", inbox.WorkerConfig{Concurrency: 2}, 4, 0},
		{"PollOnly needs no listener", inbox.WorkerConfig{Concurrency: 3, PollOnly: true}, 4, 0},
		{"PollOnly default Concurrency", inbox.WorkerConfig{PollOnly: true}, 2, 0},
		{"SystemPool holds the listener and bookkeeping", inbox.WorkerConfig{Concurrency: 3}, 4, 2},
		{"SystemPool default Concurrency", inbox.WorkerConfig{}, 2, 2},
		{"PollOnly SystemPool of one", inbox.WorkerConfig{PollOnly: true}, 4, 1},
	} {
		if tc.sysConns > 0 {
			tc.cfg.SystemPool = lazyPool(t, tc.sysConns)
		}
		if _, err := inbox.NewWorker(lazyPool(t, tc.maxConns), reg, tc.cfg); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestConstructorsRefuseNilPool(t *testing.T) {
	t.Parallel()
	if _, err := inbox.NewClient(nil, inbox.Config{}); err == nil {
		t.Fatal("NewClient(nil) succeeded")
	}
	if _, err := inbox.NewWorker(nil, handler.NewRegistry(), inbox.WorkerConfig{}); err == nil {
		t.Fatal("NewWorker(nil) succeeded")
	}
	if _, err := inbox.NewWorker(lazyPool(t, 0), nil, inbox.WorkerConfig{}); err == nil {
		t.Fatal("NewWorker with a nil registry succeeded")
	}
	if _, err := inbox.NewAdmin(nil, inbox.AdminConfig{}); err == nil {
		t.Fatal("NewAdmin(nil) succeeded")
	}
}
