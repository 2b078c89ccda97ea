// Package cfgerr checks the configs of the transports: the
// *inbox.ConfigError every validate returns, so that
// errors.Is(err, inbox.ErrInvalidConfig) holds for all of them and each names
// the field the same way ("nats.Config.Stream"); the rules their validates
// share (check.go); and the defaults-then-validate step of their
// constructors (prepare.go).
package cfgerr

import (
	"fmt"
	"strings"

	"github.com/pginbox/pginbox/inbox"
)

// New formats a message that starts with the field ("Config.Stream is
// required: ...") and returns it as a ConfigError for pkg's field.
func New(pkg, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	field, detail := msg, ""
	if i := strings.IndexAny(msg, " :"); i >= 0 {
		field, detail = msg[:i], strings.TrimLeft(msg[i:], " :")
	}
	return &inbox.ConfigError{Field: pkg + "." + field, Detail: detail}
}
