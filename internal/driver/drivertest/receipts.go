package drivertest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
)

// consumer is the consumer of most cases' receipts.
const consumer = "drivertest.consumer"

// lease is the lease of a claim that must not expire during a case.
const lease = 10 * time.Minute

// draft returns a message of scope s for c with its own payload (which
// gives it its fingerprint).
func draft(s inboxtype.Scope, c, messageID string) *driver.Draft {
	return draftWith(s, c, messageID, `{"message":"`+messageID+`"}`)
}

// draftWith is draft with the payload given (canonical JSON).
func draftWith(s inboxtype.Scope, c, messageID, payload string) *driver.Draft {
	return remember(&driver.Draft{
		ID:            inboxtype.New(),
		Identity:      inboxtype.Identity{Scope: s, Source: "drivertest", Consumer: c, MessageID: messageID},
		EventType:     "drivertest.event",
		SchemaVersion: 1,
		Fingerprint:   sha256.Sum256([]byte(payload)),
		Payload:       payload,
		Metadata:      `{"trace":"` + messageID + `"}`,
		MaxAttempts:   3,
	})
}

// scopeOf maps the ID of every draft and event the suite made to its scope
// ID, so that reading its state by hand is a statement Citus routes to one
// shard, not one it runs on every shard.
var scopeOf sync.Map // inboxtype.ID -> string

// remember notes d's scope (scopeOf) and returns d.
func remember(d *driver.Draft) *driver.Draft {
	scopeOf.Store(d.ID, d.Identity.Scope.ID)
	return d
}

// keyed gives d the ordering key k.
func keyed(d *driver.Draft, k string) *driver.Draft {
	d.OrderingKey = k
	return d
}

// again is a redelivery of d: the same identity and content, a new draft ID.
func again(d *driver.Draft) *driver.Draft {
	c := *d
	c.ID = inboxtype.New()
	return remember(&c)
}

// changed is d's identity with other content: an identity conflict.
func changed(d *driver.Draft) *driver.Draft {
	c := draftWith(d.Identity.Scope, d.Identity.Consumer, d.Identity.MessageID, `{"changed":true}`)
	c.OrderingKey = d.OrderingKey
	return c
}

// plan groups drafts as the Client does before it calls Accept: each
// identity once (its first occurrence), per scope in scope order, plain
// drafts in identity order, keyed drafts in the order given.
func plan(drafts ...*driver.Draft) []driver.AcceptGroup {
	seen := map[inboxtype.Identity]bool{}
	var groups []driver.AcceptGroup
	group := func(s inboxtype.Scope) *driver.AcceptGroup {
		i, found := slices.BinarySearchFunc(groups, s, func(g driver.AcceptGroup, s inboxtype.Scope) int { return compareScopes(g.Scope, s) })
		if !found {
			groups = slices.Insert(groups, i, driver.AcceptGroup{Scope: s})
		}
		return &groups[i]
	}
	for _, d := range drafts {
		if seen[d.Identity] {
			continue
		}
		seen[d.Identity] = true
		g := group(d.Identity.Scope)
		if d.OrderingKey != "" {
			g.Keyed = append(g.Keyed, d)
		} else {
			g.Plain = append(g.Plain, d)
		}
	}
	for _, g := range groups {
		slices.SortFunc(g.Plain, func(a, b *driver.Draft) int {
			return cmp.Or(cmp.Compare(a.Identity.Source, b.Identity.Source),
				cmp.Compare(a.Identity.Consumer, b.Identity.Consumer),
				cmp.Compare(a.Identity.MessageID, b.Identity.MessageID))
		})
	}
	return groups
}

func compareScopes(a, b inboxtype.Scope) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID))
}

// state is a receipt's stored state, read as the superuser.
type state struct {
	Status        string // the live status: the work row's, else the receipt's
	ReceiptStatus string
	Work          bool // it has a work row
	Attempts      int32
	Version       int64
	Token         string // the claim token, "" for none
	LeaseLive     bool   // a lease that has not expired
	Due           bool   // a work row due now
	Payload       *string
	Metadata      string
	Seq           *int64
	ScopeKind     string
	ScopeID       string
	Consumer      string
	ReplayOf      string
	LastError     *string
}

// sameState reports whether a and b show no change of the receipt.
func sameState(a, b state) bool {
	return a.Status == b.Status && a.ReceiptStatus == b.ReceiptStatus && a.Work == b.Work && a.Attempts == b.Attempts &&
		a.Version == b.Version && a.Token == b.Token && a.LeaseLive == b.LeaseLive && a.Due == b.Due
}

// state reads receipt id's state; the case fails when there is none.
func (e *env) state(id inboxtype.ID) state {
	e.Helper()
	s, ok := e.lookup(id)
	if !ok {
		e.Fatalf("receipt %s: not found", id)
	}
	return s
}

// lookup reads receipt id's state, if it exists.
func (e *env) lookup(id inboxtype.ID) (state, bool) {
	e.Helper()
	var s state
	where, args := "r.id = $1", []any{id}
	if sid, ok := scopeOf.Load(id); ok {
		where, args = "r.id = $1 AND r.scope_id = $2", []any{id, sid}
	}
	err := e.pool.QueryRow(e.ctx, `
		SELECT coalesce(w.status, r.status), r.status, w.receipt_id IS NOT NULL,
			coalesce(w.attempts, r.attempts), coalesce(w.version, r.version),
			coalesce(w.claim_token::text, ''), coalesce(w.lease_expires_at > now(), false),
			coalesce(w.available_at <= now(), false), r.payload::text, r.metadata::text, r.ordering_seq,
			r.scope_kind, r.scope_id, r.consumer, coalesce(r.replay_of::text, ''), coalesce(w.last_error, r.last_error)
		FROM pginbox_receipts r
		LEFT JOIN pginbox_work w ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id
		WHERE `+where, args...).Scan(&s.Status, &s.ReceiptStatus, &s.Work, &s.Attempts, &s.Version,
		&s.Token, &s.LeaseLive, &s.Due, &s.Payload, &s.Metadata, &s.Seq, &s.ScopeKind, &s.ScopeID, &s.Consumer, &s.ReplayOf, &s.LastError)
	if errors.Is(err, pgx.ErrNoRows) {
		return state{}, false
	}
	e.must(err, "reading receipt "+id.String())
	return s, true
}

// wantStatus fails the case unless receipt id's live status is want.
func (e *env) wantStatus(id inboxtype.ID, want string) state {
	e.Helper()
	s := e.state(id)
	if s.Status != want {
		e.Fatalf("receipt %s: status %s, want %s", id, s.Status, want)
	}
	return s
}

// receipts counts the receipts stored.
func (e *env) receipts() int {
	e.Helper()
	return e.count("SELECT count(*) FROM pginbox_receipts")
}

// accept runs the drafts' plan on a connection of its own, unscoped, with
// the workers woken in the plan when the driver can, and fails the case on
// an error.
func (e *env) accept(drafts ...*driver.Draft) *driver.Accepted {
	e.Helper()
	res, err := e.acceptOn(e.pool, ownWay, plan(drafts...), func() bool { return true })
	e.must(err, "accept")
	return res
}

// acceptWay is how the runtime sends a plan: on a connection of its own
// (unscoped; or scoped, as the Client does once row-level security refused
// an unscoped insert), or in a caller's transaction (AcceptTx).
type acceptWay struct {
	name   string
	tx     bool
	scoped bool
}

var (
	ownWay       = acceptWay{name: "own"}
	ownScopedWay = acceptWay{name: "own-scoped", scoped: true}
	callerTxWay  = acceptWay{name: "caller-tx", tx: true}
	acceptWays   = []acceptWay{ownWay, ownScopedWay, callerTxWay}
)

// acceptOn runs groups on pool in way w: in a caller's transaction it first
// gives the transaction the first group's scope (EnsureScope, as AcceptTx
// does), then commits it after the plan, or rolls it back on an error.
func (e *env) acceptOn(pool *pgxpool.Pool, w acceptWay, groups []driver.AcceptGroup, wake func() bool) (*driver.Accepted, error) {
	e.Helper()
	if !w.tx {
		conn, done := e.conn(pool)
		defer done()
		return e.drv.Accept(e.ctx, &driver.AcceptPlan{Conn: conn, Groups: groups, Scoped: w.scoped, Wake: wake})
	}
	tx, err := pool.Begin(e.ctx)
	e.must(err, "begin")
	defer tx.Rollback(e.ctx)
	have, applied, err := e.drv.EnsureScope(e.ctx, tx, groups[0].Scope)
	e.must(err, "EnsureScope")
	if !applied || have != groups[0].Scope {
		e.Fatalf("EnsureScope on a new transaction: have %v, applied %v; want %v, true", have, applied, groups[0].Scope)
	}
	res, err := e.drv.Accept(e.ctx, &driver.AcceptPlan{Tx: tx, Groups: groups})
	if err != nil {
		return nil, err
	}
	return res, tx.Commit(e.ctx)
}

// outcome is what an accepted message became, as the Client tells it from
// the plan's result.
type outcome struct {
	kind   string // "accepted", "duplicate" or "conflict"
	id     inboxtype.ID
	status string
}

// resolve tells each draft's outcome from res, as the Client does: the
// draft whose insert created the receipt holding its identity is accepted;
// the others are duplicates or conflicts by fingerprint. The case fails when
// res leaves a draft without the receipt that holds its identity, or
// reports one identity twice.
func (e *env) resolve(drafts []*driver.Draft, res *driver.Accepted) []outcome {
	e.Helper()
	byID := map[inboxtype.ID]*driver.Draft{}
	for _, d := range drafts {
		byID[d.ID] = d
	}
	type holder struct {
		id          inboxtype.ID
		status      string
		fingerprint []byte
		insertedBy  inboxtype.ID
	}
	holders := map[inboxtype.Identity]holder{}
	for _, id := range res.Inserted {
		d, ok := byID[id]
		if !ok {
			e.Fatalf("Inserted holds %s, which is no draft of the plan", id)
		}
		if _, dup := holders[d.Identity]; dup {
			e.Fatalf("identity %s inserted twice", d.Identity)
		}
		holders[d.Identity] = holder{id: id, status: "PENDING", fingerprint: d.Fingerprint[:], insertedBy: id}
	}
	for _, h := range res.Existing {
		if _, dup := holders[h.Identity]; dup {
			e.Fatalf("identity %s reported inserted and existing, or existing twice", h.Identity)
		}
		holders[h.Identity] = holder{id: h.ID, status: h.Status, fingerprint: h.Fingerprint}
	}
	out := make([]outcome, len(drafts))
	for i, d := range drafts {
		h, ok := holders[d.Identity]
		switch {
		case !ok:
			e.Fatalf("no receipt reported for %s", d.Identity)
		case h.insertedBy == d.ID:
			out[i] = outcome{"accepted", h.id, h.status}
		case string(h.fingerprint) == string(d.Fingerprint[:]):
			out[i] = outcome{"duplicate", h.id, h.status}
		default:
			out[i] = outcome{"conflict", h.id, h.status}
		}
	}
	return out
}

// wantOutcomes fails the case unless got matches want (an outcome's status
// is checked when want sets it).
func (e *env) wantOutcomes(got, want []outcome) {
	e.Helper()
	if len(got) != len(want) {
		e.Fatalf("%d outcomes, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].kind != want[i].kind || got[i].id != want[i].id || (want[i].status != "" && got[i].status != want[i].status) {
			e.Fatalf("outcome %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// claimer returns a claimer of consumers (consumer when none) with lease l.
func (e *env) claimer(l time.Duration, consumers ...string) driver.Claimer {
	if len(consumers) == 0 {
		consumers = []string{consumer}
	}
	cfg := driver.ClaimerConfig{Consumers: consumers, Lease: l}
	if e.nodes == nil {
		return e.drv.NewClaimer(cfg)
	}
	cfg.Local = true
	nc := &nodeClaimer{e: e}
	for range e.nodes.Count() {
		nc.each = append(nc.each, e.drv.NewClaimer(cfg))
	}
	return nc
}

// claim runs one claim of c on a connection of the superuser's pool (a
// worker's system pool sees every scope).
func (e *env) claim(c driver.Claimer, scopes, n int) ([]db.ReceiptClaimScopeRow, bool) {
	e.Helper()
	conn, done := e.conn(e.pool)
	defer done()
	rows, more, err := c.Claim(e.ctx, conn, scopes, n)
	e.must(err, "claim")
	return rows, more
}

// nodeClaimer claims node by node, each node's claimer on a connection to
// that node and from its own shards, as a worker with sessions on the
// worker nodes does: each node is asked for its share of the scopes and
// rows the nodes before it left, then the nodes that filled their share
// for what is left. The connection it is given says as which role: each
// node's connection copies its settings.
type nodeClaimer struct {
	e    *env
	each []driver.Claimer
}

func (c *nodeClaimer) Claim(ctx context.Context, given *pgxpool.Conn, scopes, n int) ([]db.ReceiptClaimScopeRow, bool, error) {
	var out []db.ReceiptClaimScopeRow
	more := false
	served := map[string]bool{}
	ask := func(i, scopes, k int) (bool, error) {
		rows, m, err := c.onNode(ctx, given, i, c.each[i], scopes, k)
		out = append(out, rows...)
		for _, r := range rows {
			served[r.ScopeKind+"/"+r.ScopeID] = true
		}
		more = more || m
		return len(rows) == k, err
	}
	var filled []int
	for i := range c.each {
		left, scopesLeft, rest := n-len(out), scopes-len(served), len(c.each)-i
		if left <= 0 || scopesLeft <= 0 {
			break
		}
		full, err := ask(i, (scopesLeft+rest-1)/rest, (left+rest-1)/rest)
		if err != nil {
			return out, more, err
		}
		if full {
			filled = append(filled, i)
		}
	}
	for _, i := range filled {
		left, scopesLeft := n-len(out), scopes-len(served)
		if left <= 0 || scopesLeft <= 0 {
			break
		}
		if _, err := ask(i, scopesLeft, left); err != nil {
			return out, more, err
		}
	}
	return out, more || len(out) == n, nil
}

// Woke passes the wake-up to every node's claimer.
func (c *nodeClaimer) Woke(t time.Time) {
	for _, claims := range c.each {
		claims.Woke(t)
	}
}

// onNode runs one claim of claims on node i, as given's role.
func (c *nodeClaimer) onNode(ctx context.Context, given *pgxpool.Conn, i int, claims driver.Claimer, scopes, n int) ([]db.ReceiptClaimScopeRow, bool, error) {
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, false, err
	}
	cfg.ConnConfig = given.Conn().Config().Copy()
	host, port, err := net.SplitHostPort(c.e.nodes.Addr(i))
	if err != nil {
		return nil, false, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, false, err
	}
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, false, err
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	defer conn.Release()
	return claims.Claim(ctx, conn, scopes, n)
}

// claimIDs is the receipt IDs of rows.
func claimIDs(rows []db.ReceiptClaimScopeRow) []inboxtype.ID {
	ids := make([]inboxtype.ID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// claimOne claims for want's consumer with a claimer of its own and fails
// the case unless it claims exactly want: the case leaves nothing else of
// the consumer due.
func (e *env) claimOne(want inboxtype.ID) db.ReceiptClaimScopeRow {
	e.Helper()
	rows, _ := e.claim(e.claimer(lease, e.state(want).Consumer), 16, 16)
	if len(rows) != 1 || rows[0].ID != want {
		e.Fatalf("claimed %v, want [%s]", claimIDs(rows), want)
	}
	return rows[0]
}

// claimAll claims for the drafts' consumers with a claimer of its own and
// fails the case unless it claims exactly the drafts; it returns the rows
// by receipt ID.
func (e *env) claimAll(drafts ...*driver.Draft) map[inboxtype.ID]db.ReceiptClaimScopeRow {
	e.Helper()
	var consumers []string
	ids := make([]inboxtype.ID, len(drafts))
	for i, d := range drafts {
		if !slices.Contains(consumers, d.Identity.Consumer) {
			consumers = append(consumers, d.Identity.Consumer)
		}
		ids[i] = d.ID
	}
	rows, _ := e.claim(e.claimer(lease, consumers...), 16, 2*len(drafts))
	e.wantClaimed("claiming every due receipt", rows, ids...)
	byID := map[inboxtype.ID]db.ReceiptClaimScopeRow{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	return byID
}

// handlerTx is a worker's handler transaction: opened by Opening with
// ReceiptStart, which completed rows.
type handlerTx struct {
	e     *env
	conn  *pgxpool.Conn
	done  func() // gives conn back
	scope inboxtype.Scope
	rows  []db.ReceiptStartRow
	pid   uint32
}

// start opens a handler transaction of scope s on pool whose first statement
// completes the claimed receipts (ReceiptStart, fenced by their tokens), as
// the worker does.
func (e *env) start(pool *pgxpool.Pool, s inboxtype.Scope, claimed ...db.ReceiptClaimScopeRow) *handlerTx {
	e.Helper()
	ids := make([]string, len(claimed))
	tokens := make([]string, len(claimed))
	for i, r := range claimed {
		ids[i], tokens[i] = r.ID.UUIDString(), r.ClaimToken.UUIDString()
	}
	return e.startFenced(pool, s, ids, tokens)
}

// startFenced is start with the IDs and tokens given as text.
func (e *env) startFenced(pool *pgxpool.Pool, s inboxtype.Scope, ids, tokens []string) *handlerTx {
	e.Helper()
	h := &handlerTx{e: e, scope: s}
	h.conn, h.done = e.conn(pool)
	open := e.drv.Opening(h.conn, s, driver.Open{TimeoutMs: time.Minute.Milliseconds(), PID: &h.pid})
	rows, err := db.New(open).ReceiptStart(e.ctx, db.ReceiptStartParams{ScopeID: s.ID, Ids: ids, Tokens: tokens})
	e.must(err, "ReceiptStart")
	if h.conn.Conn().PgConn().TxStatus() != 'T' {
		e.Fatalf("after Opening's ReceiptStart the connection's transaction status is %q, want an open transaction", h.conn.Conn().PgConn().TxStatus())
	}
	h.rows = rows
	return h
}

// commit commits the handler transaction, with the promotion of the next
// receipts of the completed receipts' ordering keys queued before COMMIT
// when promote is set, as the worker does; it returns the consumers the
// promotion returned.
func (h *handlerTx) commit(promote bool) []string {
	h.e.Helper()
	defer h.done()
	b := &pgx.Batch{}
	if promote {
		var consumers, keys, locks []string
		for _, r := range h.rows {
			if r.OrderingKey != nil {
				consumers = append(consumers, r.Consumer)
				keys = append(keys, *r.OrderingKey)
				locks = append(locks, driver.KeyLockName(r.Consumer, h.scope, *r.OrderingKey))
			}
		}
		if len(keys) > 0 {
			h.e.drv.QueuePromotion(h.e.ctx, b, h.scope, consumers, keys, locks)
		}
	}
	n := b.Len()
	b.Queue("COMMIT")
	br := h.conn.SendBatch(h.e.ctx, b)
	var woken []string
	for i := range n {
		if i < n-1 {
			_, err := br.Exec()
			h.e.must(err, "the promotion's locks")
			continue
		}
		rows, err := br.Query()
		h.e.must(err, "the promotion")
		woken, err = pgx.CollectRows(rows, pgx.RowTo[string])
		h.e.must(err, "the promotion")
	}
	tag, err := br.Exec()
	h.e.must(err, "COMMIT")
	h.e.must(br.Close(), "COMMIT")
	if tag.String() != "COMMIT" {
		h.e.Fatalf("COMMIT answered %q", tag)
	}
	return woken
}

// rollback rolls the handler transaction back.
func (h *handlerTx) rollback() {
	h.e.Helper()
	_, err := h.conn.Exec(h.e.ctx, "ROLLBACK")
	h.e.must(err, "ROLLBACK")
	h.done()
}

// complete claims id alone and completes it in a handler transaction of its
// own, promoting the next receipt of its key.
func (e *env) complete(id inboxtype.ID) {
	e.Helper()
	row := e.claimOne(id)
	s := inboxtype.Scope{Kind: inboxtype.ScopeKind(row.ScopeKind), ID: row.ScopeID}
	h := e.start(e.pool, s, row)
	if len(h.rows) != 1 {
		e.Fatalf("ReceiptStart completed %d receipts, want 1", len(h.rows))
	}
	h.commit(true)
	e.wantStatus(id, "COMPLETED")
}

// fail records a failed attempt of a claimed receipt as the worker does
// (ReceiptFail, on the worker's pool with the receipt's scope).
func (e *env) fail(pool *pgxpool.Pool, row db.ReceiptClaimScopeRow, dead bool, delay time.Duration) (db.ReceiptFailRow, error) {
	e.Helper()
	s := inboxtype.Scope{Kind: inboxtype.ScopeKind(row.ScopeKind), ID: row.ScopeID}
	return db.New(e.drv.Scoped(pool, s)).ReceiptFail(e.ctx, db.ReceiptFailParams{
		Dead: dead, DelayMs: delay.Milliseconds(), LastError: "drivertest failure",
		ScopeID: row.ScopeID, ID: row.ID, ClaimToken: row.ClaimToken,
	})
}
