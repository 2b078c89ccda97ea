package outbox

import (
	"context"
	"time"
)

// SetAfterPublish installs a crash-test hook on r: f runs once a batch was
// published, before the relay marks it.
func SetAfterPublish(r *Relay, f func(published []ID)) { r.hooks.afterPublish = f }

// SetListening installs a hook that runs once r's listener subscribed and
// woke its batch loop.
func SetListening(r *Relay, f func()) { r.hooks.listening = f }

// SetListed installs a hook that runs after each read of the scopes with due
// events on Citus, with the number of scopes it listed.
func SetListed(r *Relay, f func(scopes int)) { r.hooks.listed = f }

// PurgeBefore runs r's maintenance purge of events published before cutoff.
func PurgeBefore(ctx context.Context, r *Relay, cutoff time.Time) (int64, error) {
	return r.purge(ctx, cutoff)
}
