package main

import (
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/transport/internal/brokercmd/cmdtest"
)

func TestMain(m *testing.M) {
	cmdtest.Child(main)
	inboxtest.Main(m)
}

// The scope comes from an explicit -tenant ID or -global: an empty or
// missing tenant is a usage error (exit 2), never the global scope.
func TestScopeRequired(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=" + inboxtest.Database(t)}
	base := []string{"-brokers", "127.0.0.1:1", "-topic", "t", "-group", "g", "-source", "s", "-consumer", "c"}
	cases := []struct {
		args []string
		want string
	}{
		{append(base, "-tenant", ""), "-tenant or -global is required"},
		{base, "-tenant or -global is required"},
		{append(base, "-tenant", "acme", "-global"), "-tenant and -global exclude each other"},
	}
	for _, tc := range cases {
		code, stderr := cmdtest.Run(t, 20*time.Second, env, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// -delivery-limit is Config.DeliveryLimit: a value the consumer refuses
// ends the program with exit 1 and the reason.
func TestDeliveryLimitRefused(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=" + inboxtest.Database(t)}
	args := []string{"-brokers", "127.0.0.1:1", "-topic", "t", "-group", "g", "-tenant", "acme", "-source", "s", "-consumer", "c", "-delivery-limit", "-1"}
	code, stderr := cmdtest.Run(t, 20*time.Second, env, args...)
	if code != 1 || !strings.Contains(stderr, "Config.DeliveryLimit: is -1") {
		t.Errorf("exit %d, stderr %q; want exit 1 and the refused DeliveryLimit", code, stderr)
	}
}
