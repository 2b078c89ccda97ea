package brokercmd

import (
	"context"
	"errors"
	"flag"
	"strings"
	"time"
)

// Flag is one row of a program's flag table: a flag (or, with Secret, an
// environment variable) bound to the option it sets.
type Flag struct {
	name, usage, env string
	required, logged bool
	secret           bool
	bind             func(fs *flag.FlagSet, getenv func(string) string, f Flag)
	dial             func(ctx context.Context, s *Session) error
	unset            func() bool
	value            func() any
}

// Var declares -name, setting *p; def is its value when -name is not given.
func Var[T string | int | int64 | bool | time.Duration](p *T, name string, def T, usage string) Flag {
	f := Flag{name: name, usage: usage}
	f.unset = func() bool { var zero T; return *p == zero }
	f.value = func() any { return *p }
	f.bind = func(fs *flag.FlagSet, getenv func(string) string, f Flag) {
		switch p := any(p).(type) {
		case *string:
			d := any(def).(string)
			if f.env != "" {
				d = or(getenv(f.env), d)
			}
			fs.StringVar(p, name, d, f.help())
		case *int:
			fs.IntVar(p, name, any(def).(int), f.help())
		case *int64:
			fs.Int64Var(p, name, any(def).(int64), f.help())
		case *bool:
			fs.BoolVar(p, name, any(def).(bool), f.help())
		case *time.Duration:
			fs.DurationVar(p, name, any(def).(time.Duration), f.help())
		}
	}
	return f
}

// List declares -name, a comma-separated list setting *p.
func List(p *[]string, name, usage string) Flag {
	f := Flag{name: name, usage: usage}
	f.unset = func() bool { return len(*p) == 0 }
	f.value = func() any { return *p }
	f.bind = func(fs *flag.FlagSet, getenv func(string) string, f Flag) {
		if v := getenv(f.env); f.env != "" && v != "" {
			*p = strings.Split(v, ",")
		}
		fs.Func(name, f.help(), func(v string) error {
			*p = strings.Split(v, ",")
			return nil
		})
	}
	return f
}

// Secret declares the environment variable env, read into *p: a secret
// stays off the command line, where ps and shell histories would show it.
// usage says what it is, in the error when it is Required and not set.
func Secret[T string | []byte](p *T, env, usage string) Flag {
	f := Flag{name: env, usage: usage, env: env, secret: true}
	f.unset = func() bool { return len(*p) == 0 }
	f.bind = func(_ *flag.FlagSet, getenv func(string) string, _ Flag) {
		if v := getenv(env); v != "" {
			*p = T(v)
		}
	}
	return f
}

// Required makes the flag's absence (an empty value) a usage error.
func (f Flag) Required() Flag { f.required = true; return f }

// Env makes the environment variable env the default of a string or list
// flag.
func (f Flag) Env(env string) Flag { f.env = env; return f }

// Dial makes dial run when the program starts, before the database is
// dialled, so that a bad broker setting is reported first: dial makes the
// client the flag configures (and hands it to s.Defer to be closed).
func (f Flag) Dial(dial func(ctx context.Context, s *Session) error) Flag { f.dial = dial; return f }

// Logged adds the flag's value to the line a program logs when it starts.
func (f Flag) Logged() Flag { f.logged = true; return f }

func (f Flag) help() string {
	var notes []string
	if f.env != "" {
		notes = append(notes, "env "+f.env)
	}
	if f.required {
		notes = append(notes, "required")
	}
	if len(notes) == 0 {
		return f.usage
	}
	return f.usage + " (" + strings.Join(notes, ", ") + ")"
}

// check refuses a required flag left empty.
func (f Flag) check() error {
	switch {
	case !f.required || !f.unset():
		return nil
	case f.secret:
		return errors.New(f.env + " is not set: export " + f.usage)
	case f.env != "":
		return errors.New("-" + f.name + " (or " + f.env + ") is required")
	}
	return errors.New("-" + f.name + " is required")
}

// or is v, or def when v is empty.
func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
