package tenancy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pginbox/pginbox/examples/tenancy"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
)

// TestTenancydRuns runs cmd/tenancyd as a process, as its doc comment says, on
// the restricted and system roles: an order accepted for a tenant shows up in
// that tenant's read only, and an order naming another tenant never does.
func TestTenancydRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs cmd/tenancyd")
	}
	t.Parallel()
	s := deploy(t)
	bin := filepath.Join(t.TempDir(), "tenancyd")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/tenancyd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+s.appDSN, "SYSTEM_DATABASE_URL="+s.systemDSN, "ADDR="+addr)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	base := "http://" + addr + "/orders"
	get := func(tenant string) (int, []tenancy.Order) {
		req, _ := http.NewRequest("GET", base, nil)
		req.Header.Set("X-Tenant-ID", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var orders []tenancy.Order
		_ = json.NewDecoder(resp.Body).Decode(&orders)
		return resp.StatusCode, orders
	}
	post := func(tenant, id string, p tenancy.OrderImported) {
		body, _ := json.Marshal(p)
		req, _ := http.NewRequest("POST", base, bytes.NewReader(body))
		req.Header.Set("X-Tenant-ID", tenant)
		req.Header.Set("X-Event-ID", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s for %s: %s\n%s", id, tenant, resp.Status, logs.String())
		}
	}
	logged := testkit.Lazy(logs.String)
	testkit.Eventually(t, 30*time.Second, func() bool { code, _ := get("acme"); return code == http.StatusOK }, "tenancyd serving; log:\n%v", logged)

	post("acme", "evt-1", tenancy.OrderImported{TenantID: "acme", OrderID: "o-1", TotalCents: 1250})
	post("acme", "evt-2", tenancy.OrderImported{TenantID: "globex", OrderID: "o-2", TotalCents: 990})
	post("globex", "evt-1", tenancy.OrderImported{TenantID: "globex", OrderID: "o-3", TotalCents: 10})
	want := []tenancy.Order{{TenantID: "acme", OrderID: "o-1", TotalCents: 1250}}
	testkit.Eventually(t, 30*time.Second, func() bool { _, o := get("acme"); return len(o) == 1 && o[0] == want[0] },
		"acme's order projected; log:\n%v", logged)
	testkit.Eventually(t, 30*time.Second, func() bool { _, o := get("globex"); return len(o) == 1 }, "globex's order projected; log:\n%v", logged)
	// acme's message that names globex was tried and refused by the policy.
	var foreign inbox.ID
	if err := s.owner.QueryRow(context.Background(),
		"SELECT id FROM pginbox_receipts WHERE scope_id = 'acme' AND message_id = 'evt-2'").Scan(&foreign); err != nil {
		t.Fatal(err)
	}
	r := inboxtest.WaitForStatus(t, s.owner, foreign, inbox.StatusRetryable, 30*time.Second)
	if !strings.Contains(r.LastError, "row-level security policy") {
		t.Fatalf("the foreign write failed otherwise: %s", r)
	}
	if _, o := get("globex"); len(o) != 1 || o[0].OrderID != "o-3" {
		t.Fatalf("globex sees %+v, want only o-3", o)
	}
	if code, _ := get(""); code != http.StatusBadRequest {
		t.Fatalf("GET without a tenant: %d, want 400", code)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("tenancyd after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("tenancyd did not stop on SIGTERM\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "listening on "+addr) {
		t.Errorf("tenancyd logs lack the address:\n%s", logs.String())
	}
}
