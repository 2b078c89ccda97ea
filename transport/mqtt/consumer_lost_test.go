package mqtt_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/mqtt"
)

// The Consumer counts what it settles, and a session the broker no longer
// has after messages arrived in it is an error event and a metric (once per
// loss), not a silent fresh start.
func TestStatsAndSessionLost(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	pool := newPool(t)
	e := newEnv(t, url)
	e.subscribeDead(t)
	var mu sync.Mutex
	var events []error
	// The observer holds the first report until the test has checked the
	// count: it must not run ahead of the report.
	reported, release := make(chan struct{}, 1), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	cfg := e.config(url, testlog.Errors(t))
	cfg.OnError = func(err error) {
		mu.Lock()
		events = append(events, err)
		mu.Unlock()
		select {
		case reported <- struct{}{}:
		default:
		}
		<-release
	}
	c, err := mqtt.NewConsumer(newClient(t, pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	drill.Run(t, c.Run)
	pub := e.publisher(t)
	publish(t, pub, e.topic, "evt-1", `{"orderId":"o-1"}`)
	publish(t, pub, e.topic, "evt-2", ``) // dead-lettered: empty payload
	drill.Eventually(t, 20*time.Second, "one ack and one dead letter", func() bool {
		s := c.Stats()
		return s.Acked == 1 && s.DeadLettered == 1
	})
	if s := c.Stats(); s.Connects != 1 || s.SessionsLost != 0 {
		t.Fatalf("stats %+v, want one connect and no session lost", s)
	}

	// Another client takes the session over and ends it: the Consumer is
	// disconnected and finds no session when it reconnects.
	expiry := uint32(0)
	thief := connectRaw(t, url, &paho.Connect{ClientID: e.cid, CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}, nil)
	_ = thief.Disconnect(&paho.Disconnect{})
	testkit.WaitFor(t, reported, 20*time.Second, "the session loss reported")
	if n := c.Stats().SessionsLost; n != 0 {
		t.Fatalf("Stats().SessionsLost = %d while the report is still with OnError: the count ran ahead of it", n)
	}
	releaseOnce()
	drill.Eventually(t, 20*time.Second, "the session loss counted", func() bool { return c.Stats().SessionsLost == 1 })
	mu.Lock()
	got := append([]error(nil), events...)
	mu.Unlock()
	if len(got) != 1 || !errors.Is(got[0], mqtt.ErrSessionLost) {
		t.Fatalf("OnError got %v, want one ErrSessionLost", got)
	}

	// It subscribes again and goes on; a reconnect without a new message is
	// not a second loss.
	publish(t, pub, e.topic, "evt-3", `{"orderId":"o-3"}`)
	drill.Eventually(t, 20*time.Second, "the message after the loss acknowledged", func() bool { return c.Stats().Acked == 2 })
	if s := c.Stats(); s.SessionsLost != 1 || s.Connects < 2 {
		t.Fatalf("stats %+v, want one session lost and a reconnect", s)
	}
}
