package service_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pginbox/pginbox/internal/service"
)

// The wait doubles from Min with each failure in a row and stays at Max.
func TestBackoffDoublesUpToMax(t *testing.T) {
	b := service.Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	var got []time.Duration
	for range 6 {
		got = append(got, b.Failed())
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	for range 1000 { // no overflow however long it fails
		b.Failed()
	}
	if d := b.Failed(); d != time.Second {
		t.Fatalf("after many failures the wait is %v, want Max", d)
	}
}

// A success starts the waits over.
func TestBackoffStartsOverAfterSuccess(t *testing.T) {
	b := service.Backoff{Min: 10 * time.Millisecond, Max: time.Second}
	b.Failed()
	b.Failed()
	b.Succeeded()
	if d := b.Failed(); d != 10*time.Millisecond {
		t.Fatalf("first wait after a success %v, want Min", d)
	}
}

// A failed attempt that had run longer than Reset is the first in a row; a
// short one is not. Without Reset, time does not start the waits over. The
// clock is synctest's: a sleep moves it on at once, to the nanosecond.
func TestBackoffStartsOverAfterALongSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := service.Backoff{Min: 10 * time.Millisecond, Max: time.Second, Reset: 20 * time.Millisecond}
		b.Start()
		b.Failed()
		b.Start()
		if d := b.Failed(); d != 20*time.Millisecond {
			t.Fatalf("second short failure waits %v, want 20ms", d)
		}
		b.Start()
		time.Sleep(30 * time.Millisecond) // the fake clock: the session lasts 30ms, no wait
		if d := b.Failed(); d != 10*time.Millisecond {
			t.Fatalf("failure after a long session waits %v, want Min", d)
		}

		noReset := service.Backoff{Min: 10 * time.Millisecond, Max: time.Second}
		noReset.Start()
		noReset.Failed()
		time.Sleep(30 * time.Millisecond) // the fake clock, as above
		if d := noReset.Failed(); d != 20*time.Millisecond {
			t.Fatalf("without Reset the second failure waits %v, want 20ms", d)
		}
	})
}

// Sleep returns at once, false, when ctx is done, and true after the wait
// otherwise.
func TestSleep(t *testing.T) {
	if !service.Sleep(t.Context(), time.Millisecond) {
		t.Fatal("Sleep with a live ctx reported it done")
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	if service.Sleep(ctx, time.Hour) {
		t.Fatal("Sleep reported a cancelled ctx live")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Sleep returned %v after the cancel", took)
	}
}
