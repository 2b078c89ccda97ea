package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/canonjson"
)

// The identity every bench message shares but for its message ID.
const (
	benchTenant    = "tenant-bench"
	benchSource    = "bench"
	benchConsumer  = "bench.orders.v1"
	benchEventType = "order.created"

	// payloadBytes is the reference benchmark's payload size.
	payloadBytes = 265

	effectsTable = "pginbox_bench_effects"
)

type suite struct {
	o     Options
	base  *pgxpool.Config // the database measured; pools copy it
	admin *pgxpool.Pool   // setup, fixtures and checks; never measured
	prog  *progress

	// accept-fresh's raw ceiling, for accept-group's comparison with it.
	freshRaw *Measure
}

func newSuite(ctx context.Context, o Options, base *pgxpool.Config, prog *progress) (*suite, error) {
	if err := checkPayloads(); err != nil {
		return nil, err
	}
	admin, err := newPool(ctx, base, 2)
	if err != nil {
		return nil, err
	}
	s := &suite{o: o, base: base, admin: admin, prog: prog}
	var n, events int
	if err := admin.QueryRow(ctx, "SELECT (SELECT count(*) FROM pginbox_receipts), (SELECT count(*) FROM pginbox_outbox)").Scan(&n, &events); err != nil {
		admin.Close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	if n+events > 0 && !o.Reset {
		admin.Close()
		return nil, fmt.Errorf("bench: the database holds %d receipts and %d outbox events and the bench deletes every one: point it at a disposable database, or pass --reset to delete them", n, events)
	}
	_, err = admin.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+effectsTable+` (
		receipt_id uuid PRIMARY KEY,
		message_id text NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now())`)
	if err != nil {
		admin.Close()
		return nil, fmt.Errorf("bench: creating the business table: %w", err)
	}
	if o.RLS {
		if err := s.setupRLS(ctx); err != nil {
			admin.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *suite) close() { s.admin.Close() }

// cleanup leaves the database as empty as it was found.
func (s *suite) cleanup(ctx context.Context) error {
	if s.o.RLS {
		if err := s.dropRLS(ctx); err != nil {
			return err
		}
	}
	_, err := s.admin.Exec(ctx, "TRUNCATE pginbox_receipts, pginbox_work, pginbox_audit, pginbox_outbox; DROP TABLE IF EXISTS "+effectsTable)
	return err
}

// reset empties the inbox and the business table, seeds retained COMPLETED
// receipts, analyzes, and checkpoints, so every measured phase starts alike.
func (s *suite) reset(ctx context.Context, retained int) error {
	if _, err := s.admin.Exec(ctx, "TRUNCATE pginbox_receipts, pginbox_work, pginbox_audit, pginbox_outbox, "+effectsTable); err != nil {
		return fmt.Errorf("bench: truncating: %w", err)
	}
	if retained > 0 {
		if _, err := s.seed(ctx, "retained", retained, inbox.StatusCompleted); err != nil {
			return err
		}
		if err := s.analyze(ctx); err != nil {
			return err
		}
	}
	return s.checkpoint(ctx)
}

// analyze gives the planner statistics after seeding: a table in steady
// state has them (autovacuum analyzes a bulk load within a minute), and
// without them it may walk the scope index for an identity lookup, or plan a
// phase differently from one run to the next.
func (s *suite) analyze(ctx context.Context) error {
	if _, err := s.admin.Exec(ctx, "ANALYZE pginbox_receipts, pginbox_work"); err != nil {
		return fmt.Errorf("bench: analyzing: %w", err)
	}
	return nil
}

// checkpoint flushes dirty pages so a phase does not pay for its
// predecessor's writes. Without the privilege (a DATABASE_URL role that is not
// superuser or pg_checkpoint) it is skipped.
func (s *suite) checkpoint(ctx context.Context) error {
	_, err := s.admin.Exec(ctx, "CHECKPOINT")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bench: checkpoint: %w", err)
	}
	return nil
}

// seed inserts n receipts named prefix-0000000.. with their real fingerprints,
// so redelivering one through pginbox is a duplicate. It returns their IDs.
func (s *suite) seed(ctx context.Context, prefix string, n int, status inbox.Status) ([][16]byte, error) {
	ids := make([][16]byte, n)
	now := time.Now()
	rows := make([][]any, n)
	for i := range n {
		ids[i] = newID()
		p := payloadFor(i)
		fp := inbox.Fingerprint(benchEventType, 1, []byte(p))
		var completed *time.Time
		attempts := 0
		if status == inbox.StatusCompleted {
			completed, attempts = &now, 1
		}
		rows[i] = []any{ids[i], "tenant", benchTenant, benchSource, benchConsumer, seedID(prefix, i),
			benchEventType, int32(1), fp[:], p, "{}", string(status), int32(attempts), int32(10), completed}
	}
	_, err := s.admin.CopyFrom(ctx, pgx.Identifier{"pginbox_receipts"},
		[]string{"id", "scope_kind", "scope_id", "source", "consumer", "message_id",
			"event_type", "schema_version", "fingerprint", "payload", "metadata", "status",
			"attempts", "max_attempts", "completed_at"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return nil, fmt.Errorf("bench: seeding %d %s receipts: %w", n, status, err)
	}
	if status == inbox.StatusCompleted {
		return ids, nil
	}
	// An active receipt has its queue row.
	work := make([][]any, n)
	for i := range n {
		work[i] = []any{ids[i], "tenant", benchTenant, benchConsumer, string(status), int32(10)}
	}
	_, err = s.admin.CopyFrom(ctx, pgx.Identifier{"pginbox_work"},
		[]string{"receipt_id", "scope_kind", "scope_id", "consumer", "status", "max_attempts"},
		pgx.CopyFromRows(work))
	if err != nil {
		return nil, fmt.Errorf("bench: seeding %d %s queue rows: %w", n, status, err)
	}
	return ids, nil
}

func seedID(prefix string, i int) string { return fmt.Sprintf("%s-%07d", prefix, i) }

// dbCounts reads what the database holds.
type dbCounts struct {
	receipts, pending, completed, effects int
}

func (s *suite) counts(ctx context.Context) (dbCounts, error) {
	var c dbCounts
	err := s.admin.QueryRow(ctx, `
		SELECT count(*),
		       count(*) FILTER (WHERE status = 'PENDING'),
		       count(*) FILTER (WHERE status = 'COMPLETED'),
		       (SELECT count(*) FROM `+effectsTable+`)
		FROM pginbox_receipts_live`).Scan(&c.receipts, &c.pending, &c.completed, &c.effects)
	if err != nil {
		return c, fmt.Errorf("bench: counting: %w", err)
	}
	return c, nil
}

// payloadFor returns message i's payload: an order event of exactly
// payloadBytes bytes of canonical JSON (keys sorted, no whitespace), so
// canonicalizing it changes nothing and raw and pginbox store the same bytes.
func payloadFor(i int) string {
	const format = `{"amount":"%05d.%02d","currency":"EUR","customerId":"cus_%010d","items":[{"qty":2,"sku":"SKU-%06d"},{"qty":1,"sku":"SKU-%06d"}],"note":"%s","orderId":"ord_%012d","placedAt":"2026-10-28T12:00:00Z"}`
	return fmt.Sprintf(format, i%100000, i%100, i, i%1000000, (i*7)%1000000, notePad, i)
}

var notePad = func() string {
	const format = `{"amount":"%05d.%02d","currency":"EUR","customerId":"cus_%010d","items":[{"qty":2,"sku":"SKU-%06d"},{"qty":1,"sku":"SKU-%06d"}],"note":"%s","orderId":"ord_%012d","placedAt":"2026-10-28T12:00:00Z"}`
	n := len(fmt.Sprintf(format, 0, 0, 0, 0, 0, "", 0))
	return strings.Repeat("x", payloadBytes-n)
}()

// checkPayloads makes sure the fixture is what the bench claims: 265 bytes
// that pginbox's canonicalizer leaves unchanged.
func checkPayloads() error {
	for _, i := range []int{0, 1, 99_999, 1_234_567} {
		p := payloadFor(i)
		if len(p) != payloadBytes {
			return fmt.Errorf("bench: payload %d is %d bytes, want %d", i, len(p), payloadBytes)
		}
		c, err := canonjson.Canonicalize([]byte(p), canonjson.Limits{MaxDepth: 64, MaxBytes: 1 << 20})
		if err != nil || string(c) != p {
			return fmt.Errorf("bench: payload %d is not canonical JSON (%v)", i, err)
		}
	}
	return nil
}

// message is call i's delivery for pginbox.
func message(id string, payloadIndex int) inbox.Message {
	return inbox.Message{
		Identity: inbox.Identity{
			Scope:     inbox.Tenant(benchTenant),
			Source:    benchSource,
			Consumer:  benchConsumer,
			MessageID: id,
		},
		EventType:     benchEventType,
		SchemaVersion: 1,
		Payload:       json.RawMessage(payloadFor(payloadIndex)),
	}
}

// newID returns a time-ordered random UUID, like pginbox's ULIDs, so the raw
// loop's primary-key inserts have the same locality as pginbox's.
func newID() [16]byte {
	var id [16]byte
	binary.BigEndian.PutUint64(id[0:8], uint64(time.Now().UnixMilli())<<16|uint64(rand.Uint32()&0xffff))
	binary.BigEndian.PutUint64(id[8:16], rand.Uint64())
	return id
}

func uuidText(id [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}
