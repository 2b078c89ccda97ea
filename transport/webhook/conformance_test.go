//go:build unix

package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/conformance"
	"github.com/pginbox/pginbox/transport/webhook"
)

// TestConsumerConformance runs the consumer suite on the Handler, with a
// webhook sender of the test's own in the broker's place: it keeps each
// event until the endpoint answered 2xx (settled) or a 4xx (given up: the
// driver's dead letter, reason from the answer's code), and sends again
// after a 503 or a failed request, one event at a time, in order.
func TestConsumerConformance(t *testing.T) {
	t.Parallel()
	conformance.RunConsumer(t, driver{})
}

type driver struct{}

// SharedAddr names no broker: the sender is in the test (Setup.Addr is
// not used).
func (driver) SharedAddr(t *testing.T) string { return "127.0.0.1:0" }

func (driver) PrivateBroker(t *testing.T) conformance.Broker {
	t.Fatal("no broker process: the restart case does not apply (see Skip)")
	return nil
}

func (driver) Skip(c conformance.Case) string {
	switch c {
	case conformance.ConsumerCut:
		return "the Handler holds no connection to a broker: the sender opens one per delivery, and a cut request is one the sender sends again (a duplicate if it was stored)"
	case conformance.Poison:
		return "delivery limits and dead letters are the sender's: the Handler answers 503 on a storage failure and the sender decides how often to retry"
	case conformance.ConsumerRestart:
		return "there is no broker process: the events waiting for delivery are kept by the sender"
	}
	return ""
}

func (driver) NewChannel(t *testing.T, _ string) conformance.Channel { return &sender{} }

const confKeyID = "conformance"

var confSecret = []byte("conformance-secret-0123456789abc")

// event is one event the sender has not settled yet.
type event struct{ id, payload string }

// sender is the suite's channel: a webhook sender's outgoing queue.
type sender struct {
	mu      sync.Mutex
	pending []event
	dead    []conformance.DeadLetter
}

func (s *sender) Send(t testing.TB, id, payload string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, event{id, payload})
}

// decodeConformance maps a body for the suite (the message ID is the
// Idempotency-Key); an empty body fails.
func decodeConformance(body []byte, _ http.Header) (inbox.Message, error) {
	if len(body) == 0 {
		return inbox.Message{}, errors.New("empty body")
	}
	return inbox.Message{
		Identity:      inbox.Identity{Source: conformance.Source, Consumer: conformance.Consumer},
		EventType:     conformance.EventType,
		SchemaVersion: conformance.SchemaVersion,
		Payload:       body,
	}, nil
}

// Start serves a Handler and runs the sender against it until stop, which
// abandons a request in flight (the sender sends it again later).
func (s *sender) Start(t testing.TB, setup conformance.Setup) (func(), error) {
	h, err := webhook.NewHandler(setup.Accepter, webhook.Config{
		Keys:           []webhook.Key{{ID: confKeyID, Secret: confSecret, Scope: setup.Scope}},
		Decode:         decodeConformance,
		IdempotencyKey: true,
		Logger:         setup.Log,
	})
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.deliver(ctx, srv)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			srv.Close()
		})
	}
	t.Cleanup(stop)
	return stop, nil
}

// deliver sends the oldest pending event until ctx ends.
func (s *sender) deliver(ctx context.Context, srv *httptest.Server) {
	for ctx.Err() == nil {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.mu.Unlock()
			sleep(ctx, 10*time.Millisecond)
			continue
		}
		ev := s.pending[0]
		s.mu.Unlock()
		status, code, msg := post(ctx, srv, ev)
		switch {
		case status >= 200 && status < 300:
			s.settle(nil)
		case status >= 400 && status < 500:
			dl := conformance.DeadLetter{MessageID: ev.id, Reason: reasons[code], Payload: ev.payload}
			if m := receiptInError.FindStringSubmatch(msg); m != nil {
				dl.Receipt = m[1]
			}
			s.settle(&dl)
		default: // 503, or no answer: send it again
			sleep(ctx, 20*time.Millisecond)
		}
	}
}

// reasons maps the Handler's 4xx codes to the suite's dead-letter reasons.
var reasons = map[string]string{
	"bad_request": conformance.ReasonDecode,
	"invalid":     conformance.ReasonInvalid,
	"conflict":    conformance.ReasonConflict,
}

// receiptInError finds the stored receipt a 409's error names.
var receiptInError = regexp.MustCompile(`as receipt (\S+) `)

// settle removes the oldest pending event, keeping its dead letter if any.
func (s *sender) settle(dl *conformance.DeadLetter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = s.pending[1:]
	if dl != nil {
		s.dead = append(s.dead, *dl)
	}
}

// post sends ev signed, with its ID as the Idempotency-Key; status 0 is no
// answer.
func post(ctx context.Context, srv *httptest.Server, ev event) (status int, code, msg string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader([]byte(ev.payload)))
	if err != nil {
		return 0, "", err.Error()
	}
	req.Header.Set(webhook.HeaderIdempotencyKey, ev.id)
	webhook.Sign(req.Header, confKeyID, confSecret, time.Now(), []byte(ev.payload))
	res, err := srv.Client().Do(req)
	if err != nil {
		return 0, "", err.Error()
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var body struct{ Code, Error string }
	_ = json.Unmarshal(raw, &body)
	return res.StatusCode, body.Code, body.Error
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (s *sender) Unsettled(t testing.TB) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

func (s *sender) DeadLetters(t testing.TB) []conformance.DeadLetter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]conformance.DeadLetter(nil), s.dead...)
}
