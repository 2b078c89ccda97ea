package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// pickupTable holds the raw pickups' rows during the fairness scenario.
const pickupTable = "pginbox_bench_pickup"

// rawPickup is one raw pickup: when it began and how long it took.
type rawPickup struct {
	at   time.Time
	took time.Duration
}

// rawPickups runs, beside a fairness phase, the least a queue woken by
// NOTIFY does to hand a new message over: commit the row with a NOTIFY in
// one statement, hear the notification on a listening connection, and claim
// the row in one UPDATE committed without waiting for the disk, as pginbox's
// claims do. It uses connections of its own, with no backlog and no handler
// slots in its way, so its latency under the flood over its latency idle is
// what the machine's load alone does to a pickup. It sends one every
// fairnessEvery, half a period after the cold tenants' messages, until end.
func (s *suite) rawPickups(ctx context.Context, end time.Time) ([]rawPickup, error) {
	var conns [3]*pgx.Conn // sender, listener, claimer
	for i := range conns {
		c, err := pgx.ConnectConfig(ctx, s.base.ConnConfig.Copy())
		if err != nil {
			return nil, fmt.Errorf("raw pickups: connecting: %w", err)
		}
		defer c.Close(context.WithoutCancel(ctx))
		conns[i] = c
	}
	sender, listener, claimer := conns[0], conns[1], conns[2]
	if _, err := listener.Exec(ctx, "LISTEN "+pickupTable); err != nil {
		return nil, fmt.Errorf("raw pickups: %w", err)
	}
	// Like pginbox's claims, which a crash only undoes (the row is due again).
	if _, err := claimer.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		return nil, fmt.Errorf("raw pickups: %w", err)
	}
	const (
		send  = "WITH m AS (INSERT INTO " + pickupTable + " (id) VALUES ($1) RETURNING id) SELECT pg_notify('" + pickupTable + "', id::text) FROM m"
		claim = "UPDATE " + pickupTable + " SET claimed = true WHERE id = $1 AND NOT claimed RETURNING id"
	)
	var out []rawPickup
	timer := time.NewTimer(fairnessEvery / 2)
	defer timer.Stop()
	for id := int64(1); ; id++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
		if time.Now().After(end) {
			return out, nil
		}
		timer.Reset(fairnessEvery)
		at := time.Now()
		if _, err := sender.Exec(ctx, send, id); err != nil {
			return nil, fmt.Errorf("raw pickups: sending: %w", err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("raw pickups: waiting for the notification of row %d: %w", id, err)
		}
		if n.Payload != strconv.FormatInt(id, 10) {
			return nil, fmt.Errorf("raw pickups: notified of row %s, want %d", n.Payload, id)
		}
		var got int64
		if err := claimer.QueryRow(ctx, claim, id).Scan(&got); err != nil {
			return nil, fmt.Errorf("raw pickups: claiming row %d: %w", id, err)
		}
		out = append(out, rawPickup{at: at, took: time.Since(at)})
	}
}

// createPickupTable creates the raw pickups' table, empty.
func (s *suite) createPickupTable(ctx context.Context) error {
	_, err := s.admin.Exec(ctx, "DROP TABLE IF EXISTS "+pickupTable+"; CREATE TABLE "+pickupTable+" (id bigint PRIMARY KEY, claimed boolean NOT NULL DEFAULT false)")
	if err != nil {
		return fmt.Errorf("bench: creating the raw pickups' table: %w", err)
	}
	return nil
}

// dropPickupTable drops it at the scenario's end.
func (s *suite) dropPickupTable(ctx context.Context) {
	s.admin.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+pickupTable)
}

// claimedPickups counts the raw pickups' rows claimed, and all of them.
func (s *suite) claimedPickups(ctx context.Context) (claimed, rows int, err error) {
	err = s.admin.QueryRow(ctx, "SELECT count(*) FILTER (WHERE claimed), count(*) FROM "+pickupTable).Scan(&claimed, &rows)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: counting the raw pickups: %w", err)
	}
	return claimed, rows, nil
}

// sortedTook returns the latencies of the pickups that began before until
// (all of them for a zero until), sorted.
func sortedTook(ps []rawPickup, until time.Time) []time.Duration {
	var out []time.Duration
	for _, p := range ps {
		if until.IsZero() || p.at.Before(until) {
			out = append(out, p.took)
		}
	}
	slices.Sort(out)
	return out
}
