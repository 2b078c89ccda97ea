package main

import (
	"os"
	"strconv"
)

// defaultActor names who runs a requeue or replay when --actor is not given:
// $USER or $LOGNAME, else the account of the process's user ID (cron jobs and
// containers often have no $USER), else "uid:N". A change is never refused for
// want of a name.
func (e *env) defaultActor() string {
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := e.getenv(k); v != "" {
			return v
		}
	}
	if u, err := e.currentUser(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid:" + strconv.Itoa(os.Getuid())
}
