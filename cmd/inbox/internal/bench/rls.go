package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/schema"
)

// RLSTarget is the goal for pginbox with row-level security enabled against
// pginbox without it in the same run: tenancy may cost at most 10%.
const RLSTarget = 0.90

// sideRLS names the side of a scenario run with row-level security enabled:
// accepts and handlers on the application role, the worker's SystemPool on
// the system role.
const sideRLS = "rls"

// The roles the RLS side connects as. They have no password: the ephemeral
// cluster trusts its unix socket.
const (
	rlsAppRole = "pginbox_bench_app"
	rlsSysRole = "pginbox_bench_sys"
)

// withRLS adds the RLS side to a scenario's sides when Options.RLS is set.
func (s *suite) withRLS(sides []string) []string {
	if s.o.RLS {
		return append(sides, sideRLS)
	}
	return sides
}

// setupRLS creates the two roles with pginbox's grants and lets the
// application role write the business table. Tenancy stays disabled but
// during the RLS side's phases (rlsOn).
func (s *suite) setupRLS(ctx context.Context) error {
	for _, r := range []struct {
		name   string
		system bool
	}{{rlsAppRole, false}, {rlsSysRole, true}} {
		_, err := s.admin.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN CREATE ROLE %s LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`, r.name))
		if err != nil {
			return fmt.Errorf("bench: --rls: creating role %s (needs a superuser, or CREATEROLE): %w", r.name, err)
		}
		stmts, err := schema.GrantStatements(r.name, r.system)
		if err != nil {
			return err
		}
		stmts = append(stmts, "GRANT SELECT, INSERT, UPDATE, DELETE ON "+effectsTable+" TO "+r.name)
		for _, st := range stmts {
			if _, err := s.admin.Exec(ctx, st); err != nil {
				return fmt.Errorf("bench: --rls: %s (BYPASSRLS needs a superuser): %w", st, err)
			}
		}
	}
	return nil
}

// dropRLS removes what setupRLS created.
func (s *suite) dropRLS(ctx context.Context) error {
	if err := schema.DisableTenancy(ctx, s.admin); err != nil {
		return err
	}
	for _, r := range []string{rlsAppRole, rlsSysRole} {
		if _, err := s.admin.Exec(ctx, "DROP OWNED BY "+r+"; DROP ROLE "+r); err != nil {
			return fmt.Errorf("bench: dropping role %s: %w", r, err)
		}
	}
	return nil
}

// rlsOn enables tenancy for one phase; the returned function disables it.
func (s *suite) rlsOn(ctx context.Context) (off func(), err error) {
	if err := schema.EnableTenancy(ctx, s.admin); err != nil {
		return nil, fmt.Errorf("bench: --rls: enabling tenancy: %w", err)
	}
	return func() {
		if err := schema.DisableTenancy(context.WithoutCancel(ctx), s.admin); err != nil {
			s.prog.note("--rls: disabling tenancy: %v", err)
		}
	}, nil
}

// asRole is the measured database's config connecting as role.
func (s *suite) asRole(role string) *pgxpool.Config {
	cfg := s.base.Copy()
	cfg.ConnConfig.User = role
	cfg.ConnConfig.Password = ""
	return cfg
}

// finishRLS reports the RLS side against plain pginbox.
func (s *suite) finishRLS(r *Result, rls sample) {
	if !s.o.RLS {
		return
	}
	m := rls.measure(fmt.Sprintf("pginbox with row-level security enabled (%s for accepts and handlers, %s for the worker's SystemPool)", rlsAppRole, rlsSysRole))
	m.CallsPerSec, m.Seconds = round2(m.CallsPerSec), round2(m.Seconds)
	r.RLS = &m
	if r.CallsPerSec > 0 {
		r.RLSRatio = round2(m.CallsPerSec / r.CallsPerSec)
	}
	r.RLSTarget = fmt.Sprintf(">= %.2f x pginbox with row-level security off", RLSTarget)
	r.RLSMeetsTarget = r.RLSRatio >= RLSTarget
	if rls.firstErr != nil {
		r.failf("%s: %d errors, first: %v", sideRLS, rls.errors, rls.firstErr)
	}
}
