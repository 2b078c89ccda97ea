package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	webconsole "github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/visible"
)

var consoleCmd = &command{
	Name:    "console",
	Args:    "[--listen ADDR] [--tenant ID | --global] [--read-only] [--actor NAME]",
	Summary: "serve the web console (overview, receipts, dead, requeue, replay, purge) on a loopback address",
	Help: `
The console shows what ` + "`inbox stats`, `list` and `show`" + ` show, in a browser, and
requeues, replays and purges with the same checks (expected version, audit
trail). It serves only loopback clients: this command has no authentication, so
--listen must be a loopback address such as 127.0.0.1:8080 or [::1]:8080. To
reach it from another machine use an SSH tunnel
(ssh -L 8080:127.0.0.1:8080 HOST); to serve a team, embed package console in a
service with an Authenticate hook.

Actions are recorded in the audit trail under --actor (default $USER, then
$LOGNAME); with --read-only there are no actions and no actor is needed. Stop
it with Ctrl-C.`,
}

func init() {
	consoleCmd.Run = runConsole
	register(consoleCmd)
}

func runConsole(ctx context.Context, e *env, args []string) error {
	fs := newFlags(consoleCmd)
	var d dbFlags
	var s scopeFlags
	d.add(fs)
	s.add(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "loopback `ADDR` (host:port) to serve on")
	readOnly := fs.Bool("read-only", false, "hide and refuse requeue, replay, skip and purge")
	actor := fs.String("actor", "", "who, for the audit trail of actions (default $USER; not needed with --read-only)")
	pos, err := parseFlags(e, consoleCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if err := s.check(); err != nil {
		return err
	}
	if s.tenant != "" {
		// The other commands learn this from the admin API; the console
		// would start and then fail every page.
		if rule, detail := inboxtype.CheckIdentityString(s.tenant); rule != "" {
			return usagef("--tenant: %s", detail)
		}
	}
	if err := checkLoopbackListen(*listen); err != nil {
		return err
	}
	who := *actor
	for _, v := range []string{"USER", "LOGNAME"} {
		if who == "" {
			who = e.getenv(v)
		}
	}
	if who == "" && !*readOnly {
		return usagef("--actor is required ($USER is not set): say who acts, for the audit trail, or pass --read-only")
	}
	scope := webconsole.AllScopes()
	switch {
	case s.tenant != "":
		scope = webconsole.Tenant(s.tenant)
	case s.global:
		scope = webconsole.Global()
	}

	pool, err := d.connect(ctx, e, true)
	if err != nil {
		return err
	}
	defer pool.Close()
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: discardLogger})
	if err != nil {
		return err
	}
	h, err := webconsole.New(admin, webconsole.Config{
		LocalActor: who,
		LocalScope: scope,
		ReadOnly:   *readOnly,
		// Actions and server-side failures, with their actor, on stderr.
		Logger: slog.New(slog.NewTextHandler(e.stderr, nil)),
	})
	if err != nil {
		return usagef("%v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s (is another process using the port? pick another with --listen): %w", *listen, err)
	}
	// "localhost" could resolve to anything: check what was actually bound.
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err != nil || !ap.Addr().Unmap().IsLoopback() {
		ln.Close()
		return usagef("--listen %s bound %s, which is not a loopback address; use 127.0.0.1 or [::1]", *listen, ln.Addr())
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	mode := fmt.Sprintf("acting as %q", who)
	if *readOnly {
		mode = "read-only"
	}
	fmt.Fprintf(e.stdout, "console: http://%s/ (%s, %s); Ctrl-C stops it\n", ln.Addr(), visible.String(scope.String()), mode)

	select {
	case err := <-served:
		return fmt.Errorf("console server stopped: %w", err)
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("console: shutting down: %w", err)
	}
	fmt.Fprintln(e.stdout, "console: stopped")
	return nil
}

// checkLoopbackListen refuses a --listen address that other machines could
// reach: the CLI's console has no authentication.
func checkLoopbackListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--listen %q: want host:port, for example 127.0.0.1:8080", addr)
	}
	if host == "localhost" {
		return nil // checked again once bound
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return usagef("--listen %s is not a loopback address: the console would be reachable from other machines, and `inbox console` has no authentication. "+
		"Listen on 127.0.0.1 or [::1] (from elsewhere, use an SSH tunnel: ssh -L 8080:127.0.0.1:8080 HOST), "+
		"or embed package console in your service with an Authenticate hook", addr)
}
