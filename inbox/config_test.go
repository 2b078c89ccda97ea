package inbox_test

import (
	"context"
	"errors"
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
	pool := lazyPool(t, 0)
	for _, tc := range []struct {
		field string
		cfg   inbox.Config
	}{
		{"Config.MaxAttempts", inbox.Config{MaxAttempts: -1}},
		{"Config.MaxAttempts", inbox.Config{MaxAttempts: 1 << 32}},    // int32() would store 0
		{"Config.MaxAttempts", inbox.Config{MaxAttempts: 1<<32 + 1}},  // int32() would store 1
		{"Config.MaxPayloadDepth", inbox.Config{MaxPayloadDepth: -5}}, //
		{"Config.MaxPayloadBytes", inbox.Config{MaxPayloadBytes: 1 << 40}},
		{"Config.MaxMetadataBytes", inbox.Config{MaxMetadataBytes: -1}},
		{"Config.MaxMetadataBytes", inbox.Config{MaxMetadataBytes: inbox.MaxMetadataBytesLimit + 1}},
		{"Config.GroupCommitMaxBatch", inbox.Config{GroupCommitMaxBatch: -1}},
		{"Config.GroupCommitFlushers", inbox.Config{GroupCommitFlushers: -1}},
		{"Config.GroupCommitMaxWait", inbox.Config{GroupCommitMaxWait: -time.Second}},
	} {
		_, err := inbox.NewClient(pool, tc.cfg)
		requireConfigError(t, err, tc.field)
	}
	if _, err := inbox.NewClient(pool, inbox.Config{MaxAttempts: inbox.MaxMaxAttempts}); err != nil {
		t.Fatalf("the largest MaxAttempts is valid: %v", err)
	}
}

func TestWorkerConfigValidation(t *testing.T) {
	t.Parallel()
	pool := lazyPool(t, 50)
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "c", EventType: "e", SchemaVersion: 1},
		func(context.Context, *handler.Msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field string
		cfg   inbox.WorkerConfig
	}{
		{"WorkerConfig.Concurrency", inbox.WorkerConfig{Concurrency: -1}},
		{"WorkerConfig.ClaimBatch", inbox.WorkerConfig{ClaimBatch: -1}},
		{"WorkerConfig.MessagesPerTx", inbox.WorkerConfig{MessagesPerTx: inbox.MaxMessagesPerTx + 1}},
		{"WorkerConfig.PollInterval", inbox.WorkerConfig{PollInterval: -time.Second}},
		{"WorkerConfig.Lease", inbox.WorkerConfig{Lease: -time.Second}},
		{"WorkerConfig.Lease", inbox.WorkerConfig{Lease: time.Millisecond}},
		{"WorkerConfig.HeartbeatInterval", inbox.WorkerConfig{HeartbeatInterval: -1}},
		{"WorkerConfig.HeartbeatInterval", inbox.WorkerConfig{Lease: 3 * time.Second, HeartbeatInterval: 3 * time.Second}},
		{"WorkerConfig.HeartbeatInterval", inbox.WorkerConfig{HeartbeatInterval: inbox.DefaultLease}},
		{"WorkerConfig.RecoverInterval", inbox.WorkerConfig{RecoverInterval: -1}},
		{"WorkerConfig.HandlerTimeout", inbox.WorkerConfig{HandlerTimeout: -1}},
		{"WorkerConfig.HandlerTimeout", inbox.WorkerConfig{HandlerTimeout: 30 * 24 * time.Hour}},
		{"WorkerConfig.ShutdownGrace", inbox.WorkerConfig{ShutdownGrace: -1}},
	} {
		_, err := inbox.NewWorker(pool, reg, tc.cfg)
		requireConfigError(t, err, tc.field)
	}
}

// A default pgxpool has max(4, NumCPU) connections: the default Concurrency
// must fit it, while an explicit Concurrency the pool cannot serve is refused.
func TestWorkerDefaultConcurrencyFitsSmallPool(t *testing.T) {
	t.Parallel()
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "c", EventType: "e", SchemaVersion: 1},
		func(context.Context, *handler.Msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := inbox.NewWorker(lazyPool(t, 4), reg, inbox.WorkerConfig{}); err != nil {
		t.Fatalf("a default worker on a 4-connection pool: %v", err)
	}
	_, err := inbox.NewWorker(lazyPool(t, 4), reg, inbox.WorkerConfig{Concurrency: 10})
	if err == nil || !strings.Contains(err.Error(), "pool MaxConns 4 is below Concurrency 10 + 2") {
		t.Fatalf("want the pool sizing error, got %v", err)
	}
	_, err = inbox.NewWorker(lazyPool(t, 2), reg, inbox.WorkerConfig{})
	if err == nil || !strings.Contains(err.Error(), "raise pool_max_conns to at least 3") {
		t.Fatalf("want the pool sizing error, got %v", err)
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
