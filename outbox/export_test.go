package outbox

// SetAfterPublish installs a crash-test hook on r: f runs once a batch was
// published, before the relay marks it.
func SetAfterPublish(r *Relay, f func(published []ID)) { r.hooks.afterPublish = f }

// SetListening installs a hook that runs once r's listener subscribed and
// woke its batch loop.
func SetListening(r *Relay, f func()) { r.hooks.listening = f }
