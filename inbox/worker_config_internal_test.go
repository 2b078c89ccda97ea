package inbox

import "testing"

// ClaimBatch left 0 follows the worker's concurrency: one claim can fill every
// handler slot, within DefaultClaimBatch and MaxClaimBatch.
func TestClaimBatchDefaultFollowsConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      WorkerConfig
		maxConns int
		want     int
	}{
		{"all defaults", WorkerConfig{}, 20, DefaultClaimBatch}, // Concurrency 10 x 1
		{"64 workers", WorkerConfig{Concurrency: 64}, 66, 64},
		{"64 workers, 10 per transaction", WorkerConfig{Concurrency: 64, MessagesPerTx: 10}, 66, 640},
		{"few workers keep the floor", WorkerConfig{Concurrency: 2}, 4, DefaultClaimBatch},
		{"one worker, large batches", WorkerConfig{Concurrency: 1, MessagesPerTx: 50}, 3, 50},
		{"capped", WorkerConfig{Concurrency: MaxConcurrency, MessagesPerTx: MaxMessagesPerTx}, MaxConcurrency + 2, MaxClaimBatch},
		{"set explicitly", WorkerConfig{Concurrency: 64, MessagesPerTx: 10, ClaimBatch: 7}, 66, 7},
	} {
		if got := tc.cfg.withDefaults(tc.maxConns).ClaimBatch; got != tc.want {
			t.Errorf("%s: ClaimBatch defaults to %d, want %d", tc.name, got, tc.want)
		}
	}
}
