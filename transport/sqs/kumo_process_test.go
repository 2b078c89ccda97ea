package sqs_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sivchari/kumo"

	"github.com/pginbox/pginbox/transport/internal/conformance"
)

// envKumoPort makes the test binary a kumo server on that port (see
// serveKumo).
const envKumoPort = "PGINBOX_TEST_KUMO_PORT"

// kumoFlush is how often kumo writes its queues to KUMO_DATA_DIR, in ms.
const kumoFlush = 20

// startKumoProcess runs the test binary as a kumo server of the test's own,
// its queues saved in the process's data directory. Its Restart stops it
// cleanly: kumo writes its queues in the background every kumoFlush ms, so
// a SIGKILL loses what it confirmed since; a SIGTERM lets it write them
// first.
func startKumoProcess(t *testing.T) conformance.Broker {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return conformance.Cleanly(conformance.StartProcessEnv(t, self, "", self, func(int, string) []string {
		return []string{"-test.run=^$"} // TestMain serves before any test runs
	}, func(port int, dir string) []string {
		return []string{envKumoPort + "=" + strconv.Itoa(port), "KUMO_DATA_DIR=" + dir,
			"KUMO_PERSIST_FLUSH_INTERVAL_MS=" + strconv.Itoa(kumoFlush)}
	}))
}

// serveKumo returns false in the test process. In the child of
// startKumoProcess it serves kumo on the port it was given until SIGTERM,
// or until its parent (the test) is gone, lets kumo write its queues, and
// exits. kumo's in-process server takes a random port, so a proxy holds
// the fixed one a restart must keep.
func serveKumo() bool {
	port := os.Getenv(envKumoPort)
	if port == "" {
		return false
	}
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "kumo on port %s: %v\n", port, err)
		os.Exit(2)
	}
	srv := kumo.NewServer() // loads the queues from KUMO_DATA_DIR
	target, err := url.Parse(srv.URL)
	if err != nil {
		fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fail(err)
	}
	held := newInflight()
	front := &http.Server{Handler: held.track(httputil.NewSingleHostReverseProxy(target)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = front.Serve(ln) }()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	parent := os.Getppid()
	for waiting := true; waiting; {
		select {
		case <-stop:
			waiting = false
		case <-time.After(time.Second):
			waiting = os.Getppid() == parent
		}
	}
	// No request may change the queues after the last write: every request
	// runs to its end (a long poll ends within its wait time, 1s in these
	// tests; 20s bounds a stuck one, inside the 30s the parent waits), then
	// what is still in flight is sent again (see inflight).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if front.Shutdown(ctx) != nil {
		_ = front.Close()
	}
	if err := held.requeue(ctx, clientAt(target.Host)); err != nil {
		fail(err)
	}
	srv.Close() // waits for kumo's handlers
	// kumo writes its state on a timer and tells nobody when: let several
	// flushes pass before exiting.
	time.Sleep(25 * kumoFlush * time.Millisecond)
	os.Exit(0)
	return true
}
