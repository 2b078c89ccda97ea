package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/testkit"
)

const (
	maxAttempts = 2         // the model's MAX_ATTEMPTS
	leaseMs     = 3_600_000 // leases and backoffs outlast a trace: the trace's own steps expire them
	lockWait    = 5 * time.Second
)

// handlerTx is a worker's open handler transaction on a connection of its own.
type handlerTx struct {
	conn *pgxpool.Conn
	tx   pgx.Tx
	pid  int32
	// What ReceiptStart returned: the receipt's consumer, scope and ordering
	// key, whose next receipt the commit promotes.
	consumer, scope string
	key             *string
}

// driver runs the model's steps against PostgreSQL: accepts through
// inbox.Client, the workers' statements of queries/ through db, the admin
// changes through inbox.AdminView.
type driver struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	q      *db.Queries
	admin  *inbox.AdminView
	client *inbox.Client
	ids    map[int64]inbox.ID // model receipt -> database receipt
	tokens map[int64]inbox.ID // model token -> claim token
	txs    map[string]*handlerTx
	// Lease expiries the model saw while a transaction held the row: time
	// cannot be moved on a locked row, and nobody can read the lease then.
	pendingExpiry map[int64]bool
	claims        int
}

func newDriver(t *testing.T, pool *pgxpool.Pool) *driver {
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := inbox.NewClient(pool, inbox.Config{MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return &driver{
		t: t, ctx: t.Context(), pool: pool, q: db.New(pool), admin: admin.Operator(), client: client,
		ids: map[int64]inbox.ID{}, tokens: map[int64]inbox.ID{}, txs: map[string]*handlerTx{},
		pendingExpiry: map[int64]bool{},
	}
}

// consumer is the one consumer of a scope: the model's ordering key of a
// scope is the code's (consumer, scope, key).
func consumer(scope string) string { return "c-" + scope }

var allConsumers = []string{consumer("s1"), consumer("s2")}

func (d *driver) exec(sql string, args ...any) {
	d.t.Helper()
	if _, err := d.pool.Exec(d.ctx, sql, args...); err != nil {
		d.t.Fatalf("%s: %v", sql, err)
	}
}

// apply runs the step that led from prev to next and checks its outcome.
func (d *driver) apply(prev, next State) error {
	s := next.Last
	id := d.ids[s.ID]
	switch s.Act {
	case "accept":
		// Through Client.Accept: a keyed message takes its key's lock and
		// queues BLOCKED or PENDING (ReceiptKeyLock, ReceiptInsertKeyed,
		// ReceiptQueueKeyed), an unkeyed one runs ReceiptAccept.
		res, err := d.client.Accept(d.ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant(s.Scope), Source: "model", Consumer: consumer(s.Scope), MessageID: s.Msg},
			EventType: "model.event", SchemaVersion: 1, Payload: json.RawMessage(`{"n":1}`), OrderingKey: s.Key,
		})
		if err != nil {
			return err
		}
		got := "ok"
		if res.Outcome == inbox.Duplicate {
			got = "duplicate"
			if res.ID != id {
				return fmt.Errorf("accept: duplicate of %v, the model's receipt %d is %v", res.ID, s.ID, id)
			}
		} else {
			d.ids[s.ID] = res.ID
		}
		return outcome(s, got)
	case "claim":
		// The model claims any due receipt; the statement takes the oldest
		// due one of the consumer: make the model's choice the oldest.
		d.claims++
		d.exec(`UPDATE pginbox_work SET available_at = now() - interval '1 day' - $2 * interval '1 second' WHERE receipt_id = $1`, id, d.claims)
		tok := inboxtype.New()
		rc := next.Receipts[key(s.ID)]
		rows, err := d.q.ReceiptClaim(d.ctx, db.ReceiptClaimParams{Consumers: []string{consumer(rc.Scope)}, MaxWalk: 1, MaxScopes: 1, MaxCount: 1, ClaimToken: tok, LeaseMs: leaseMs})
		if err != nil {
			return err
		}
		if len(rows) != 1 || rows[0].ID != id {
			return fmt.Errorf("claim took %v, the model took receipt %d (%v)", rows, s.ID, id)
		}
		d.tokens[s.Token] = tok
		return nil
	case "heartbeat":
		// One statement per scope held, as the worker sends them.
		ids, toks := map[string][]string{}, map[string][]string{}
		for _, c := range prev.Claims[s.Worker] {
			sc := prev.Receipts[key(c.ID)].Scope
			ids[sc] = append(ids[sc], d.ids[c.ID].UUIDString())
			toks[sc] = append(toks[sc], d.tokens[c.Token].UUIDString())
		}
		lost := 0
		for sc := range ids {
			l, err := d.q.ReceiptHeartbeat(d.ctx, db.ReceiptHeartbeatParams{ScopeID: sc, Ids: ids[sc], Tokens: toks[sc], LeaseMs: leaseMs})
			if err != nil {
				return err
			}
			lost += len(l)
		}
		if want := len(prev.Claims[s.Worker]) - len(next.Claims[s.Worker]); lost != want {
			return fmt.Errorf("heartbeat reported %d lost claims, the model %d", lost, want)
		}
		return nil
	case "start":
		conn, err := d.pool.Acquire(d.ctx)
		if err != nil {
			return err
		}
		tx, err := conn.Begin(d.ctx)
		if err != nil {
			conn.Release()
			return err
		}
		sc := next.Receipts[key(s.ID)].Scope
		rows, err := db.New(tx).ReceiptStart(d.ctx, db.ReceiptStartParams{ScopeID: sc, Ids: []string{id.UUIDString()}, Tokens: []string{d.tokens[s.Token].UUIDString()}})
		if err != nil {
			_ = tx.Rollback(d.ctx)
			conn.Release()
			return err
		}
		if len(rows) == 0 {
			_ = tx.Rollback(d.ctx)
			conn.Release()
			return outcome(s, "lost")
		}
		var pid int32
		if err := tx.QueryRow(d.ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			_ = tx.Rollback(d.ctx)
			conn.Release()
			return err
		}
		d.txs[s.Worker] = &handlerTx{conn: conn, tx: tx, pid: pid, consumer: rows[0].Consumer, scope: sc, key: rows[0].OrderingKey}
		return outcome(s, "ok")
	case "commit", "rollback":
		h := d.txs[s.Worker]
		delete(d.txs, s.Worker)
		var err error
		if s.Act == "commit" {
			var promoted int
			promoted, err = d.promote(h)
			if err == nil {
				err = h.tx.Commit(d.ctx)
			} else {
				_ = h.tx.Rollback(d.ctx)
			}
			if err == nil && (promoted == 1) != (s.Created != 0) {
				err = fmt.Errorf("commit promoted %d receipts, the model receipt %d", promoted, s.Created)
			}
		} else {
			err = h.tx.Rollback(d.ctx)
		}
		h.conn.Release()
		d.unlocked(s.ID)
		return err
	case "hang":
		return nil
	case "terminateHung":
		if err := d.end(s.Worker, true); err != nil {
			return err
		}
		d.unlocked(s.ID)
		return nil
	case "recordFailure":
		_, err := d.q.ReceiptFail(d.ctx, db.ReceiptFailParams{ScopeID: next.Receipts[key(s.ID)].Scope, Dead: s.Flag, DelayMs: leaseMs, LastError: "model: handler failed", ID: id, ClaimToken: d.tokens[s.Token]})
		if errors.Is(err, pgx.ErrNoRows) {
			return outcome(s, "lost")
		}
		if err != nil {
			return err
		}
		return outcome(s, "ok")
	case "release":
		n, err := d.q.ReceiptRelease(d.ctx, db.ReceiptReleaseParams{ScopeID: next.Receipts[key(s.ID)].Scope, ID: id, ClaimToken: d.tokens[s.Token]})
		if err != nil {
			return err
		}
		return outcome(s, map[int64]string{0: "lost", 1: "ok"}[n])
	case "recover":
		n := 0
		for _, sc := range []string{"s1", "s2"} {
			rows, err := d.q.ReceiptRecover(d.ctx, db.ReceiptRecoverParams{ScopeID: sc, Consumers: allConsumers, MaxCount: 100})
			if err != nil {
				return err
			}
			n += len(rows)
		}
		if int64(n) != s.Arg {
			return fmt.Errorf("recover returned %d receipts, the model %d", n, s.Arg)
		}
		return nil
	case "leaseExpires":
		if prev.LockedBy[key(s.ID)] != "" {
			d.pendingExpiry[s.ID] = true
			return nil
		}
		d.exec(`UPDATE pginbox_work SET lease_expires_at = now() - interval '1 second' WHERE receipt_id = $1`, id)
		return nil
	case "backoffElapses":
		d.exec(`UPDATE pginbox_work SET available_at = now() - interval '1 second' WHERE receipt_id = $1`, id)
		return nil
	case "crashWorker":
		return d.crash(s.Worker, prev)
	case "serverCrash":
		// Every session of the server ends: here the handlers' sessions, the
		// only ones holding anything.
		for w := range d.txs {
			lockedID := d.lockedBy(prev, w)
			if err := d.end(w, true); err != nil {
				return err
			}
			d.unlocked(lockedID)
		}
		return nil
	case "requeue", "replay", "skip":
		p := inbox.ChangeParams{ExpectedVersion: s.Arg, Actor: "model", Reason: "model trace"}
		var err error
		if s.Act == "requeue" {
			_, err = d.admin.Requeue(d.ctx, id, p)
		} else if s.Act == "skip" {
			var res *inbox.SkipResult
			res, err = d.admin.Skip(d.ctx, id, p)
			if err == nil && res.Promoted != (s.Created != 0) {
				return fmt.Errorf("skip of receipt %d promoted: %v, the model promoted receipt %d", s.ID, res.Promoted, s.Created)
			}
		} else {
			var res *inbox.ReplayResult
			res, err = d.admin.Replay(d.ctx, id, p)
			if err == nil {
				d.ids[s.Created] = res.NewID
			}
		}
		return outcome(s, verdict(err))
	case "purge":
		n, err := d.q.ReceiptPurge(d.ctx, db.ReceiptPurgeParams{Cutoff: time.Now().Add(time.Hour), AllScopes: true, MaxCount: 100})
		if err != nil {
			return err
		}
		if n != s.Arg {
			return fmt.Errorf("purge changed %d receipts, the model %d", n, s.Arg)
		}
		return nil
	case "forge":
		return d.forge(s, id)
	}
	return fmt.Errorf("the driver does not know step %q", s.Act)
}

// promote runs, in the handler's transaction before its commit, what the
// worker sends in the commit's round trip for a receipt with an ordering
// key: the key's lock, then the promotion of its next receipt.
// It returns how many receipts it promoted.
func (d *driver) promote(h *handlerTx) (int, error) {
	if h.key == nil {
		return 0, nil
	}
	q := db.New(h.tx)
	// The lock's name as the inbox builds it (consumer, scope kind, scope ID
	// and key); here only the serialization it gives matters.
	lock := h.consumer + "\x1f" + "tenant" + "\x1f" + h.scope + "\x1f" + *h.key
	if err := q.ReceiptKeyLock(d.ctx, db.ReceiptKeyLockParams{Keys: []string{lock}, ScopeID: h.scope}); err != nil {
		return 0, err
	}
	woken, err := q.ReceiptPromote(d.ctx, db.ReceiptPromoteParams{ScopeID: h.scope, ScopeKind: "tenant", Consumers: []string{h.consumer}, Keys: []string{*h.key}})
	return len(woken), err
}

func (d *driver) lockedBy(s State, w string) int64 {
	for k, v := range s.LockedBy {
		if v == w {
			n, _ := strconv.ParseInt(k, 10, 64)
			return n
		}
	}
	return 0
}

// crash ends the worker's session as its process dying would.
func (d *driver) crash(w string, prev State) error {
	if d.txs[w] == nil {
		return nil
	}
	lockedID := d.lockedBy(prev, w)
	if err := d.end(w, false); err != nil {
		return err
	}
	d.unlocked(lockedID)
	return nil
}

// end ends a handler's session, by pg_terminate_backend (BackendTerminate,
// as the watchdog does) or by closing its connection (a crash), and waits
// until the server has rolled its transaction back.
func (d *driver) end(w string, terminate bool) error {
	h := d.txs[w]
	if h == nil {
		return nil
	}
	delete(d.txs, w)
	if terminate {
		if _, err := d.q.BackendTerminate(d.ctx, h.pid); err != nil {
			return err
		}
	}
	_ = h.conn.Conn().Close(d.ctx)
	h.conn.Release()
	var err error
	gone := testkit.Poll(lockWait, func() bool {
		var alive bool
		err = d.pool.QueryRow(d.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, h.pid).Scan(&alive)
		return err != nil || !alive
	})
	switch {
	case err != nil:
		return err
	case !gone:
		return fmt.Errorf("the session of %s (pid %d) did not end within %s", w, h.pid, lockWait)
	}
	return nil
}

// unlocked applies a lease expiry the model saw while the row was locked.
func (d *driver) unlocked(id int64) {
	if d.pendingExpiry[id] {
		delete(d.pendingExpiry, id)
		d.exec(`UPDATE pginbox_work SET lease_expires_at = now() - interval '1 second' WHERE receipt_id = $1`, d.ids[id])
	}
}

// forge writes, as a tenant's own SQL would, a row of another scope that
// references the receipt; the scope keys must refuse it.
func (d *driver) forge(s Step, id inbox.ID) error {
	var err error
	switch s.Msg {
	case "work":
		_, err = d.pool.Exec(d.ctx, `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts) VALUES ($1, 'tenant', $2, $3, 2)`,
			id, s.Scope, consumer(s.Scope))
	case "audit":
		_, err = d.pool.Exec(d.ctx, `INSERT INTO pginbox_audit (receipt_id, scope_kind, scope_id, action, actor, reason, from_status, to_status, from_version, to_version)
			VALUES ($1, 'tenant', $2, 'requeue', 'forger', 'forged', 'DEAD', 'PENDING', 1, 2)`, id, s.Scope)
	case "outbox":
		_, err = d.pool.Exec(d.ctx, `INSERT INTO pginbox_outbox (id, source, destination, event_type, schema_version, payload, scope_kind, scope_id, receipt_id)
			VALUES ($1, 'forger', 'x', 'forged', 1, '{}', 'tenant', $2, $3)`, inboxtype.New(), s.Scope, id)
	default:
		return fmt.Errorf("forge: unknown kind %q", s.Msg)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return outcome(s, "refused")
	}
	if err != nil {
		return err
	}
	return outcome(s, "accepted")
}

func verdict(err error) string {
	var wrong *inbox.WrongStateError
	var purged *inbox.PayloadPurgedError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, inbox.ErrVersionConflict):
		return "conflict"
	case errors.As(err, &wrong):
		return "wrong_state"
	case errors.As(err, &purged):
		return "purged"
	}
	return "error: " + err.Error()
}

func outcome(s Step, got string) error {
	if got != s.Outcome {
		return fmt.Errorf("%s of receipt %d: the database says %q, the model %q", s.Act, s.ID, got, s.Outcome)
	}
	return nil
}

func key(id int64) string { return strconv.FormatInt(id, 10) }
