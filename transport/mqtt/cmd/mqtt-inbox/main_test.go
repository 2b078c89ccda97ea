package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/brokertest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	db := map[string]string{"DATABASE_URL": "x"}
	base := []string{"-client-id", "c", "-topic", "t", "-dead-letter-topic", "d", "-tenant", "t", "-source", "s", "-consumer", "c"}
	without := func(flag string) []string {
		var out []string
		for i := 0; i < len(base); i += 2 {
			if base[i] != flag {
				out = append(out, base[i], base[i+1])
			}
		}
		return out
	}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{base, nil, "-database-url (or DATABASE_URL) is required"},
		{without("-client-id"), db, "-client-id is required"},
		{without("-topic"), db, "-topic is required"},
		{without("-dead-letter-topic"), db, "-dead-letter-topic is required"},
		{without("-tenant"), db, "-tenant or -global is required"},
		{append(base, "-global"), db, "-tenant and -global exclude each other"},
		{without("-source"), db, "-source is required"},
		{without("-consumer"), db, "-consumer is required"},
		{append(base, "extra"), db, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		if code := program.Run(context.Background(), tc.args, env(tc.env), &stderr); code != brokercmd.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), brokercmd.ExitUsage, tc.want)
		}
	}
	var stderr bytes.Buffer
	if code := program.Run(context.Background(), []string{"-help"}, env(nil), &stderr); code != brokercmd.ExitOK || !strings.Contains(stderr.String(), "-dead-letter-topic") {
		t.Errorf("-help: exit %d, stderr %q", code, stderr.String())
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	args := []string{"-client-id", "c", "-topic", "t", "-dead-letter-topic", "d", "-tenant", "t", "-source", "s", "-consumer", "c"}
	cases := []struct {
		extra []string
		want  string
	}{
		// The tables are in public, invisible on this search path.
		{[]string{"-database-url", inboxtest.Database(t) + " search_path=no_pginbox_here"}, "run `inbox migrate up`"},
		{[]string{"-database-url", inboxtest.Database(t), "-mqtt-url", "ws://127.0.0.1:1883"}, "want mqtt://host:port"},
		{[]string{"-database-url", inboxtest.Database(t), "-delivery-limit", "-1"}, "Config.DeliveryLimit: is -1"},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		if code := program.Run(context.Background(), append(args, tc.extra...), env(nil), &stderr); code != brokercmd.ExitError || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.extra, code, stderr.String(), brokercmd.ExitError, tc.want)
		}
	}
}

// The program accepts a published message (event type = topic, message ID
// from the message-id user property, scope from -tenant) and exits 0 on
// cancel.
func TestRunAccepts(t *testing.T) {
	t.Parallel()
	brokerURL := brokertest.Require(t, brokertest.MQTT)
	dsn := inboxtest.Database(t)
	ctx := context.Background()
	id := strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "")
	topic, clientID := "pgi/cmd/"+id+"/order.created", "pginbox-cmd-"+id

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stderr testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- program.Run(runCtx, []string{"-mqtt-url", brokerURL, "-client-id", clientID, "-topic", topic, "-dead-letter-topic", "pgi/cmd/" + id + "/dead",
			"-tenant", "acme", "-source", "shop", "-consumer", "orders.projection.v1"},
			env(map[string]string{"DATABASE_URL": dsn}), &stderr)
	}()

	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	pub := paho.NewClient(paho.ClientConfig{Conn: conn})
	if _, err := pub.Connect(ctx, &paho.Connect{ClientID: clientID + "-pub", CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect(&paho.Disconnect{})
	props := &paho.PublishProperties{}
	props.User.Add("message-id", "evt-1")
	var resp *paho.PublishResponse
	testkit.Eventually(t, 30*time.Second, func() bool { // until the program has subscribed
		resp, err = pub.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(`{"orderId":"o-1"}`), Properties: props})
		return err == nil && resp.ReasonCode == 0
	}, "a publish with a subscriber; last %v %v\n%v", testkit.Lazy(func() string { return fmt.Sprint(resp) }),
		testkit.Lazy(func() string { return fmt.Sprint(err) }), testkit.Lazy(stderr.String))

	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var eventType, scopeID string
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		return pool.QueryRow(ctx, `SELECT event_type, scope_id FROM pginbox_receipts_live WHERE message_id = 'evt-1'`).Scan(&eventType, &scopeID)
	}, "the receipt; the program's log:\n%v", testkit.Lazy(stderr.String))
	if eventType != topic || scopeID != "acme" {
		t.Fatalf("receipt: event type %q, scope %q", eventType, scopeID)
	}
	cancel()
	select {
	case code := <-done:
		if code != brokercmd.ExitOK {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the program did not stop after cancel")
	}
	// End the program's session so the broker forgets it.
	conn2, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	end := paho.NewClient(paho.ClientConfig{Conn: conn2})
	if _, err := end.Connect(ctx, &paho.Connect{ClientID: clientID, CleanStart: true}); err == nil {
		_ = end.Disconnect(&paho.Disconnect{})
	}
}
