package kafka_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pginbox/pginbox/transport/internal/conformance"
)

// The restart cases' broker is a kfake cluster in a child process of the
// test binary (serveKfake), persisting to a directory with every produce
// synced (DataDir, SyncWrites), so Restart SIGKILLs it as a crash would,
// like the other adapters' brokers: a kfake in the test process could only
// be closed in order, saving its state.
const (
	envKfakePort = "PGINBOX_KFAKE_PORT"
	envKfakeDir  = "PGINBOX_KFAKE_DIR"
)

// startKfakeProcess starts the child on a free port with its data in a
// temporary directory (conformance.StartProcess kills it at test end).
func startKfakeProcess(t *testing.T) conformance.Broker {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return conformance.StartProcessEnv(t, self, "", self, func(int, string) []string {
		return []string{"-test.run=^$"} // TestMain serves before any test runs
	}, func(port int, dir string) []string {
		return []string{envKfakePort + "=" + strconv.Itoa(port), envKfakeDir + "=" + dir}
	})
}

// serveKfake returns false in the test process. In the child of
// startKfakeProcess it serves the cluster until it is killed, or its parent
// (the test) is gone, and exits.
func serveKfake() bool {
	port := os.Getenv(envKfakePort)
	if port == "" {
		return false
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", envKfakePort, port, err)
		os.Exit(2)
	}
	parent := os.Getppid()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(p), kfake.DataDir(os.Getenv(envKfakeDir)), kfake.SyncWrites())
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting kfake on port %d: %v\n", p, err)
		os.Exit(2)
	}
	// The child's stdin is not the parent's to close, so nothing signals
	// the parent's end: an orphan is re-parented, which a poll sees.
	for os.Getppid() == parent {
		time.Sleep(time.Second)
	}
	c.Close()
	os.Exit(0)
	return true
}
