// Package brokertest finds the message brokers that integration tests run
// against. Each broker's address comes from an environment variable with the
// local default. A broker that does not answer skips the test with one line
// naming what to start, except in CI (CI=true), where it fails the test: CI
// always has the brokers, so a missing one is a broken run, not a skip.
package brokertest

import (
	"net"
	"os"
	"testing"
	"time"
)

// Broker is a broker a test needs.
type Broker struct {
	Name    string // e.g. "RabbitMQ"
	Env     string // e.g. "INBOX_TEST_RABBITMQ_URL"
	Default string // the value used when Env is unset
	// Addr extracts host:port from the value, for the reachability check.
	// Nil means the value is host:port already.
	Addr func(value string) (string, error)
}

// Brokers of the project's machines, with their defaults.
var (
	RabbitMQ = Broker{Name: "RabbitMQ", Env: "INBOX_TEST_RABBITMQ_URL", Default: "amqp://guest:guest@127.0.0.1:5672/", Addr: urlHost}
	NATS     = Broker{Name: "NATS (with JetStream)", Env: "INBOX_TEST_NATS_URL", Default: "nats://127.0.0.1:4222", Addr: urlHost}
	Redis    = Broker{Name: "Redis", Env: "INBOX_TEST_REDIS_ADDR", Default: "127.0.0.1:6379"}
	MQTT     = Broker{Name: "MQTT (Mosquitto)", Env: "INBOX_TEST_MQTT_URL", Default: "mqtt://127.0.0.1:1883", Addr: urlHost}
)

// Require returns the broker's configured value (URL or address) when the
// broker answers a TCP dial. Otherwise it skips the test, or fails it when
// the CI environment variable is "true".
func Require(t testing.TB, b Broker) string {
	t.Helper()
	v := os.Getenv(b.Env)
	if v == "" {
		v = b.Default
	}
	addr := v
	if b.Addr != nil {
		var err error
		if addr, err = b.Addr(v); err != nil {
			t.Fatalf("brokertest: %s=%q: %v", b.Env, v, err)
		}
	}
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		conn.Close()
		return v
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("brokertest: %s is not reachable at %s (%v); CI must provide it (set %s to its address)", b.Name, addr, err, b.Env)
	}
	t.Skipf("brokertest: skipping: %s not reachable at %s; start it or set %s", b.Name, addr, b.Env)
	return ""
}
