package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/schema"
)

func TestAcceptThenDuplicate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	msg := orderMsg("evt-1", map[string]any{"orderId": "o-1", "total": 12.5})
	msg.Metadata = map[string]string{"traceparent": "00-abc-01"}
	first, err := c.Accept(ctx, msg)
	is.NoErr(err)
	is.Equal(first.Outcome, inbox.Accepted)
	is.Equal(first.Status, inbox.StatusPending)
	is.True(!first.ID.IsZero())

	// Metadata is stored but not fingerprinted: changing it is still a duplicate.
	msg.Metadata = map[string]string{"traceparent": "00-def-01", "correlation-id": "c-9"}
	again, err := c.Accept(ctx, msg)
	is.NoErr(err)
	is.Equal(again.Outcome, inbox.Duplicate)
	is.Equal(again.ID, first.ID)
	is.Equal(inbox.ActionFor(err), inbox.ActionAck)

	var md, payload string
	is.NoErr(pool.QueryRow(ctx, "SELECT metadata::text, payload::text FROM pginbox_receipts_live WHERE id = $1", first.ID).Scan(&md, &payload))
	is.Equal(md, `{"traceparent": "00-abc-01"}`)        // the first delivery's metadata
	is.Equal(payload, `{"orderId":"o-1","total":12.5}`) // canonical: sorted keys, no spaces
}

func TestDuplicateReportsCurrentStatusWithoutReset(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	res, err := c.Accept(ctx, orderMsg("evt-1", raw(`{}`)))
	is.NoErr(err)
	inboxtest.SetState(t, pool, res.ID, "status = 'DEAD', attempts = 10, last_error = 'boom'")
	is.NoErr(err)
	before := rowSnapshot(t, pool, res.ID)

	dup, err := c.Accept(ctx, orderMsg("evt-1", raw(`{}`)))
	is.NoErr(err)
	is.Equal(dup.Outcome, inbox.Duplicate)
	is.Equal(dup.Status, inbox.StatusDead)
	is.Equal(rowSnapshot(t, pool, res.ID), before) // no reset of state or budget
}

func TestConcurrentRedeliveryConvergesOnOneReceipt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 40 })
	c := newClient(t, pool, inbox.Config{})

	const copies = 1000
	var (
		wg                   sync.WaitGroup
		mu                   sync.Mutex
		accepted, duplicates int
		errs                 []error
		ids                  = map[inbox.ID]bool{}
		start                = make(chan struct{})
	)
	for range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := c.Accept(ctx, orderMsg("evt-same", map[string]any{"orderId": "o-1"}))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids[res.ID] = true
			if res.Outcome == inbox.Accepted {
				accepted++
			} else {
				duplicates++
			}
		}()
	}
	close(start)
	wg.Wait()
	is.Equal(len(errs), 0)
	is.Equal(accepted, 1)
	is.Equal(duplicates, copies-1)
	is.Equal(len(ids), 1)
	is.Equal(countRows(t, pool, "true"), 1)
}

func TestConflictLeavesExistingRowUntouched(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	res, err := c.Accept(ctx, orderMsg("evt-1", raw(`{"orderId":"o-1","total":10}`)))
	is.NoErr(err)
	before := rowSnapshot(t, pool, res.ID)

	for name, msg := range map[string]inbox.Message{
		"payload": orderMsg("evt-1", raw(`{"orderId":"o-1","total":11}`)),
		"event type": func() inbox.Message {
			m := orderMsg("evt-1", raw(`{"orderId":"o-1","total":10}`))
			m.EventType = "order.updated"
			return m
		}(),
		"schema version": func() inbox.Message {
			m := orderMsg("evt-1", raw(`{"orderId":"o-1","total":10}`))
			m.SchemaVersion = 2
			return m
		}(),
	} {
		_, err = c.Accept(ctx, msg)
		var conflict *inbox.ConflictError
		if !errors.As(err, &conflict) {
			t.Fatalf("%s changed: want *ConflictError, got %v", name, err)
		}
		is.Equal(conflict.Code(), inbox.CodeIdentityConflict)
		is.Equal(conflict.ReceiptID, res.ID)
		is.True(errors.Is(err, inbox.ErrIdentityConflict))
		is.True(strings.Contains(err.Error(), "IDENTITY_CONFLICT"))
		is.Equal(inbox.ActionFor(err), inbox.ActionReject)
	}
	is.Equal(rowSnapshot(t, pool, res.ID), before)
	is.Equal(countRows(t, pool, "true"), 1)
}

func TestScopeIsPartOfIdentity(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	a := orderMsg("evt-1", raw(`{"n":1}`))
	b := a
	b.Scope = inbox.Tenant("tenant-b")
	g := a
	g.Scope = inbox.Global()
	for _, m := range []inbox.Message{a, b, g} {
		res, err := c.Accept(ctx, m)
		is.NoErr(err)
		is.Equal(res.Outcome, inbox.Accepted)
	}
	// Different content under another tenant is not a conflict.
	b.Payload = raw(`{"n":2}`)
	b.MessageID = "evt-2"
	_, err := c.Accept(ctx, b)
	is.NoErr(err)
	is.Equal(countRows(t, pool, "true"), 4)
}

func TestFingerprintIgnoresKeyOrderButNotArrayOrder(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	_, err := c.Accept(ctx, orderMsg("evt-1", raw(`{"a":1,"b":{"x":[1,2],"y":"z"}}`)))
	is.NoErr(err)
	res, err := c.Accept(ctx, orderMsg("evt-1", raw("{ \"b\" : { \"y\":\"z\", \"x\":[1, 2] }, \"a\":1 }")))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)

	_, err = c.Accept(ctx, orderMsg("evt-1", raw(`{"a":1,"b":{"x":[2,1],"y":"z"}}`)))
	is.True(errors.Is(err, inbox.ErrIdentityConflict))
}

func TestNumbersKeepTheirExactValue(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	_, err := c.Accept(ctx, orderMsg("big", raw(`{"id":9007199254740993}`)))
	is.NoErr(err)
	// Equal as float64, different as numbers: a conflict, not a duplicate.
	_, err = c.Accept(ctx, orderMsg("big", raw(`{"id":9007199254740992}`)))
	is.True(errors.Is(err, inbox.ErrIdentityConflict))
	// json.Number from Go keeps the digits too.
	res, err := c.Accept(ctx, orderMsg("big", map[string]any{"id": json.Number("9007199254740993")}))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)

	_, err = c.Accept(ctx, orderMsg("one", raw(`{"n":1}`)))
	is.NoErr(err)
	for _, same := range []string{`{"n":1.0}`, `{"n":1e0}`, `{"n":10e-1}`, `{"n":1.000}`} {
		res, err := c.Accept(ctx, orderMsg("one", raw(same)))
		is.NoErr(err)
		is.Equal(res.Outcome, inbox.Duplicate)
	}
	var stored string
	is.NoErr(pool.QueryRow(ctx, "SELECT payload->>'id' FROM pginbox_receipts_live WHERE message_id = 'big'").Scan(&stored))
	is.Equal(stored, "9007199254740993")
}

func TestInvalidInputIsRejectedAndNothingStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{
		Consumers:       []string{"orders.projection.v1"},
		MaxPayloadDepth: 8,
		MaxPayloadBytes: 1024,
	})
	long := strings.Repeat("x", 256)
	with := func(f func(*inbox.Message)) inbox.Message {
		m := orderMsg("evt-1", raw(`{"ok":true}`))
		f(&m)
		return m
	}
	type want struct {
		field string
		rule  inbox.Rule
	}
	cases := map[string]struct {
		msg  inbox.Message
		want want
	}{
		"scope missing":         {with(func(m *inbox.Message) { m.Scope = inbox.Scope{} }), want{"scope", inbox.RuleRequired}},
		"global with an ID":     {with(func(m *inbox.Message) { m.Scope = inbox.Scope{Kind: inbox.ScopeGlobal, ID: "x"} }), want{"scope.id", inbox.RuleOutOfRange}},
		"tenant empty":          {with(func(m *inbox.Message) { m.Scope = inbox.Tenant("") }), want{"scope.id", inbox.RuleRequired}},
		"tenant too long":       {with(func(m *inbox.Message) { m.Scope = inbox.Tenant(long) }), want{"scope.id", inbox.RuleTooLong}},
		"tenant control":        {with(func(m *inbox.Message) { m.Scope = inbox.Tenant("a\nb") }), want{"scope.id", inbox.RuleControlChar}},
		"tenant bad utf8":       {with(func(m *inbox.Message) { m.Scope = inbox.Tenant("a\xffb") }), want{"scope.id", inbox.RuleInvalidUTF8}},
		"source empty":          {with(func(m *inbox.Message) { m.Source = "" }), want{"source", inbox.RuleRequired}},
		"source too long":       {with(func(m *inbox.Message) { m.Source = long }), want{"source", inbox.RuleTooLong}},
		"source control":        {with(func(m *inbox.Message) { m.Source = "a\x00b" }), want{"source", inbox.RuleControlChar}},
		"source C1 control":     {with(func(m *inbox.Message) { m.Source = "a\u0085b" }), want{"source", inbox.RuleControlChar}},
		"source bad utf8":       {with(func(m *inbox.Message) { m.Source = "\xc3(" }), want{"source", inbox.RuleInvalidUTF8}},
		"consumer empty":        {with(func(m *inbox.Message) { m.Consumer = "" }), want{"consumer", inbox.RuleRequired}},
		"consumer too long":     {with(func(m *inbox.Message) { m.Consumer = long }), want{"consumer", inbox.RuleTooLong}},
		"consumer control":      {with(func(m *inbox.Message) { m.Consumer = "orders\t" }), want{"consumer", inbox.RuleControlChar}},
		"consumer bad utf8":     {with(func(m *inbox.Message) { m.Consumer = "\xed\xa0\x80" }), want{"consumer", inbox.RuleInvalidUTF8}},
		"consumer undeclared":   {with(func(m *inbox.Message) { m.Consumer = "orders.projecton.v1" }), want{"consumer", inbox.RuleUndeclared}},
		"message ID empty":      {with(func(m *inbox.Message) { m.MessageID = "" }), want{"message_id", inbox.RuleRequired}},
		"message ID too long":   {with(func(m *inbox.Message) { m.MessageID = long }), want{"message_id", inbox.RuleTooLong}},
		"message ID control":    {with(func(m *inbox.Message) { m.MessageID = "\x7f" }), want{"message_id", inbox.RuleControlChar}},
		"message ID bad utf8":   {with(func(m *inbox.Message) { m.MessageID = "\x80" }), want{"message_id", inbox.RuleInvalidUTF8}},
		"event type empty":      {with(func(m *inbox.Message) { m.EventType = "" }), want{"event_type", inbox.RuleRequired}},
		"event type too long":   {with(func(m *inbox.Message) { m.EventType = long }), want{"event_type", inbox.RuleTooLong}},
		"event type control":    {with(func(m *inbox.Message) { m.EventType = "order\rcreated" }), want{"event_type", inbox.RuleControlChar}},
		"event type bad utf8":   {with(func(m *inbox.Message) { m.EventType = "order\xfe" }), want{"event_type", inbox.RuleInvalidUTF8}},
		"schema version 0":      {with(func(m *inbox.Message) { m.SchemaVersion = 0 }), want{"schema_version", inbox.RuleOutOfRange}},
		"schema version huge":   {with(func(m *inbox.Message) { m.SchemaVersion = math.MaxInt32 + 1 }), want{"schema_version", inbox.RuleOutOfRange}},
		"invalid JSON":          {with(func(m *inbox.Message) { m.Payload = raw(`{"a":`) }), want{"payload", inbox.RuleInvalidJSON}},
		"trailing data":         {with(func(m *inbox.Message) { m.Payload = raw(`{} {}`) }), want{"payload", inbox.RuleInvalidJSON}},
		"payload bad utf8":      {with(func(m *inbox.Message) { m.Payload = []byte("{\"a\":\"\xff\"}") }), want{"payload", inbox.RuleInvalidUTF8}},
		"duplicate keys":        {with(func(m *inbox.Message) { m.Payload = raw(`{"a":1,"a":2}`) }), want{"payload", inbox.RuleDuplicateKey}},
		"escaped duplicate":     {with(func(m *inbox.Message) { m.Payload = raw(`{"a":1,"\u0061":1}`) }), want{"payload", inbox.RuleDuplicateKey}},
		"lone surrogate":        {with(func(m *inbox.Message) { m.Payload = raw(`{"a":"\ud800"}`) }), want{"payload", inbox.RuleLoneSurrogate}},
		"null character":        {with(func(m *inbox.Message) { m.Payload = raw(`{"a":"x\u0000y"}`) }), want{"payload", inbox.RuleNullCharacter}},
		"number beyond numeric": {with(func(m *inbox.Message) { m.Payload = raw(`{"a":1e999999}`) }), want{"payload", inbox.RuleNumberRange}},
		"too deep":              {with(func(m *inbox.Message) { m.Payload = raw(strings.Repeat("[", 9) + strings.Repeat("]", 9)) }), want{"payload", inbox.RuleTooDeep}},
		"too large":             {with(func(m *inbox.Message) { m.Payload = raw(`{"a":"` + strings.Repeat("x", 1100) + `"}`) }), want{"payload", inbox.RuleTooLarge}},
		"NaN from Go":           {with(func(m *inbox.Message) { m.Payload = map[string]float64{"a": math.NaN()} }), want{"payload", inbox.RuleNonFinite}},
		"Inf from Go":           {with(func(m *inbox.Message) { m.Payload = []float64{math.Inf(-1)} }), want{"payload", inbox.RuleNonFinite}},
		"bad utf8 from Go":      {with(func(m *inbox.Message) { m.Payload = map[string]string{"a": "\xff"} }), want{"payload", inbox.RuleInvalidUTF8}},
		"unsupported Go type":   {with(func(m *inbox.Message) { m.Payload = map[string]any{"f": func() {}} }), want{"payload", inbox.RuleUnsupportedType}},
		"metadata NUL":          {with(func(m *inbox.Message) { m.Metadata = map[string]string{"k": "a\x00"} }), want{"metadata", inbox.RuleNullCharacter}},
		"metadata bad utf8":     {with(func(m *inbox.Message) { m.Metadata = map[string]string{"k\xff": "v"} }), want{"metadata", inbox.RuleInvalidUTF8}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			for _, accept := range []func() error{
				func() error { _, err := c.Accept(ctx, tc.msg); return err },
				func() error {
					return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := c.AcceptTx(ctx, tx, tc.msg); return err })
				},
			} {
				err := accept()
				var verr *inbox.ValidationError
				if !errors.As(err, &verr) {
					t.Fatalf("want *ValidationError, got %v", err)
				}
				is.Equal(verr.Field, tc.want.field)
				is.Equal(verr.Rule, tc.want.rule)
				is.True(errors.Is(err, inbox.ErrInvalid))
				is.Equal(inbox.ActionFor(err), inbox.ActionReject)
				is.True(verr.Detail != "")
			}
		})
	}
	if n := countRows(t, pool, "true"); n != 0 {
		t.Fatalf("%d receipts stored from invalid input", n)
	}
	// A valid real U+FFFD in a Go string is fine, and the largest allowed depth too.
	ok := orderMsg("ok", map[string]string{"a": "\uFFFD", "b": `\ufffd`})
	res, err := c.Accept(ctx, ok)
	if err != nil || res.Outcome != inbox.Accepted {
		t.Fatalf("valid payload: %v %v", res, err)
	}
	_, err = c.Accept(ctx, orderMsg("deep", raw(strings.Repeat("[", 8)+strings.Repeat("]", 8))))
	if err != nil {
		t.Fatalf("depth at the limit: %v", err)
	}
}

func TestAcceptTxJoinsTheCallersTransaction(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	errRollback := errors.New("rollback")
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		res, err := c.AcceptTx(ctx, tx, orderMsg("evt-1", raw(`{}`)))
		is.NoErr(err)
		is.Equal(res.Outcome, inbox.Accepted)
		return errRollback
	})
	is.True(errors.Is(err, errRollback))
	is.Equal(countRows(t, pool, "true"), 0)

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := c.AcceptTx(ctx, tx, orderMsg("evt-1", raw(`{}`))); err != nil {
			return err
		}
		res, err := c.AcceptTx(ctx, tx, orderMsg("evt-1", raw(`{}`)))
		is.NoErr(err)
		is.Equal(res.Outcome, inbox.Duplicate) // sees its own insert
		return nil
	})
	is.NoErr(err)
	is.Equal(countRows(t, pool, "true"), 1)
}

func TestAcceptNotifiesInsideItsTransaction(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, dsn := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	listener, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer listener.Close(ctx)
	_, err = listener.Exec(ctx, "LISTEN "+inbox.NotifyChannel)
	is.NoErr(err)

	// Rolled back: no notification.
	_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, _ = c.AcceptTx(ctx, tx, orderMsg("evt-0", raw(`{}`)))
		return errors.New("rollback")
	})
	_, err = c.Accept(ctx, orderMsg("evt-1", raw(`{}`)))
	is.NoErr(err)
	_, err = c.Accept(ctx, orderMsg("evt-1", raw(`{}`))) // duplicate: no write, no notification
	is.NoErr(err)
	_, err = c.Accept(ctx, orderMsg("evt-2", raw(`{}`)))
	is.NoErr(err)

	for range 2 {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		is.NoErr(err)
		is.Equal(n.Channel, inbox.NotifyChannel)
		is.Equal(n.Payload, "orders.projection.v1")
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = listener.WaitForNotification(wctx)
	is.True(err != nil) // exactly two notifications
}

func TestAcceptReportsMissingSchema(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	_, err := pool.Exec(ctx, "DROP TABLE pginbox_audit, pginbox_receipts, pginbox_work CASCADE")
	is.NoErr(err)
	c := newClient(t, pool, inbox.Config{})
	_, err = c.Accept(ctx, orderMsg("evt-1", raw(`{}`)))
	is.True(errors.Is(err, schema.ErrNotMigrated))
	is.True(strings.Contains(err.Error(), "inbox migrate up"))
	is.Equal(inbox.ActionFor(err), inbox.ActionRetry)
}

func TestNewClientRejectsInvalidDeclaredConsumer(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	_, err := inbox.NewClient(pool, inbox.Config{Consumers: []string{"ok", "bad\nname"}})
	requireConfigError(t, err, "Config.Consumers")
	if _, err := inbox.NewClient(nil, inbox.Config{}); err == nil {
		t.Fatal("nil pool accepted")
	}
}
