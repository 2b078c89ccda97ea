package handler_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
)

func noop(context.Context, *handler.Msg) error { return nil }

var (
	created   = handler.Key{Consumer: "billing.v1", EventType: "order.created", SchemaVersion: 1}
	cancelled = handler.Key{Consumer: "billing.v1", EventType: "order.cancelled", SchemaVersion: 1}
	shipped   = handler.Key{Consumer: "shipping.v1", EventType: "order.created", SchemaVersion: 1}
)

func TestRegisterAll(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	reg := handler.NewRegistry()
	is.NoErr(reg.RegisterAll(handler.Entry{Key: created, Func: noop}, handler.Entry{Key: cancelled, Func: noop}))
	_, ok := reg.Lookup(created)
	is.True(ok)
	_, ok = reg.Lookup(cancelled)
	is.True(ok)
	is.Equal(reg.Consumers(), []string{"billing.v1"})
	is.NoErr(reg.RegisterAll()) // nothing to register is not an error
}

// Any bad entry fails the whole call and leaves the registry as it was.
func TestRegisterAllIsAllOrNothing(t *testing.T) {
	t.Parallel()
	bad := handler.Key{Consumer: "shipping.v1", EventType: "order.created"} // no version
	cases := []struct {
		name    string
		entries []handler.Entry
		is      error // nil: match by message only
		msg     string
	}{
		{
			name:    "key already registered",
			entries: []handler.Entry{{Key: shipped, Func: noop}, {Key: created, Func: noop}},
			is:      handler.ErrDuplicateHandler,
			msg:     "pginbox: registering billing.v1 <- order.created v1: handler registered twice: register one handler per consumer, event type and version",
		},
		{
			name:    "key given twice",
			entries: []handler.Entry{{Key: shipped, Func: noop}, {Key: shipped, Func: noop}},
			is:      handler.ErrDuplicateHandler,
			msg:     "pginbox: registering shipping.v1 <- order.created v1: handler registered twice",
		},
		{
			name:    "nil func",
			entries: []handler.Entry{{Key: shipped, Func: noop}, {Key: cancelled}},
			is:      handler.ErrNilHandler,
			msg:     "pginbox: registering billing.v1 <- order.cancelled v1: handler is nil: pass the function that handles it",
		},
		{
			name:    "incomplete key",
			entries: []handler.Entry{{Key: shipped, Func: noop}, {Key: bad, Func: noop}},
			msg:     "consumer, event type and a schema version >= 1 are required",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			reg := handler.NewRegistry()
			is.NoErr(reg.Register(created, noop))
			err := reg.RegisterAll(tc.entries...)
			is.True(err != nil)
			if tc.is != nil {
				is.True(errors.Is(err, tc.is))
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not contain %q", err, tc.msg)
			}
			_, ok := reg.Lookup(shipped)
			is.True(!ok) // the good entry before the bad one was not registered
			is.True(!reg.HasConsumer("shipping.v1"))
			is.Equal(reg.Consumers(), []string{"billing.v1"})
		})
	}
}

func TestRegisterAllNilRegistry(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var reg *handler.Registry
	err := reg.RegisterAll(handler.Entry{Key: created, Func: noop})
	is.Equal(err.Error(), "pginbox: registering handlers: the registry is nil: create it with handler.NewRegistry()")
	is.Equal(reg.Register(created, noop).Error(), err.Error())
}

// Register is RegisterAll with one entry.
func TestRegister(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(created, noop))
	is.True(errors.Is(reg.Register(created, noop), handler.ErrDuplicateHandler))
	is.True(errors.Is(reg.Register(shipped, nil), handler.ErrNilHandler))
	is.True(!reg.HasConsumer("shipping.v1"))
}
