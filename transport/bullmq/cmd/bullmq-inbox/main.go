// Command bullmq-inbox accepts the jobs of a BullMQ queue into a pginbox
// inbox: each job is moved to completed only after its accept committed,
// left active and taken again after its lock expires when the database
// fails, and moved to failed (with the reason) when it can never be
// accepted.
//
//	bullmq-inbox -database-url postgres://app@localhost/app -queue orders \
//	    -tenant acme -source shop -consumer orders.projection.v1
//
// The message ID is the job ID (or, with -id-field, a field of the job's
// data), the payload the job's data, and the event type the job's name
// unless -event-type is set. The scope comes from the flags (one tenant, or
// -global), never from the job. It runs until SIGINT or SIGTERM.
package main

import (
	"errors"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/bullmq"
	"github.com/pginbox/pginbox/transport/internal/brokercmd"
	"github.com/pginbox/pginbox/transport/internal/redisbase/rediscmd"
)

func main() { program.Main() }

var program = brokercmd.Program[bullmq.Config]{Name: "bullmq-inbox", EventType: "the job's name", Flags: flags, Serve: serve}

// flags are the program's own flags; brokercmd adds the inbox's.
func flags(c *bullmq.Config) []brokercmd.Flag {
	return []brokercmd.Flag{
		rediscmd.ClientFlag(&c.Redis),
		brokercmd.Var(&c.Queue, "queue", "", "BullMQ queue to consume").Required().Logged(),
		brokercmd.Var(&c.Prefix, "prefix", bullmq.DefaultPrefix, "the queue's key prefix (BullMQ's prefix option)"),
		brokercmd.Var(&c.Worker, "name", "", "this worker's name, recorded in the jobs it takes (default: hostname-pid)"),
		brokercmd.Var(&c.IDField, "id-field", "", "field of the job's data holding the message ID (default: the job ID)"),
		brokercmd.Var(&c.DeliveryLimit, "delivery-limit", bullmq.DefaultDeliveryLimit, "takes before a job is failed"),
		brokercmd.Var(&c.LockDuration, "lock-duration", bullmq.DefaultLockDuration, "lock of a taken job: a job not completed within it is taken again"),
		brokercmd.Var(&c.Concurrency, "concurrency", bullmq.DefaultConcurrency, "jobs accepted at once"),
	}
}

// serve makes the consumer of the configuration the flags set.
func serve(c *bullmq.Config, s *brokercmd.Session) (brokercmd.Runner, error) {
	c.Scope, c.Logger = s.Scope(), s.Log
	c.Decode = func(j bullmq.Job) (inbox.Message, error) {
		if j.Name == "" && s.EventType == "" {
			return inbox.Message{}, errors.New("no event type: give the job a name, or run with -event-type")
		}
		return s.Message(j.Name, j.Data), nil
	}
	return bullmq.NewConsumer(s.Client, *c)
}
