// Package bullmq moves the jobs of a BullMQ queue (the Node.js job queue on
// Redis) into a pginbox inbox: a job is taken like a BullMQ worker takes it
// (moved to active under a lock), accepted into the inbox, and only then
// moved to completed. A crash between the accept and the completion leaves
// the job active; its lock expires, the stalled check moves it back to wait,
// and the next accept is a Duplicate.
//
// What happens to a job is decided by inbox.ActionFor:
//
//   - ack (accepted, or a duplicate of a stored receipt): moved to completed.
//   - retry (storage failure, uncertain commit): nothing. The job stays
//     active until its lock (Config.LockDuration) expires; then a Consumer's
//     stalled check moves it back to wait and it is taken again. When its
//     attempts started ("ats") pass Config.DeliveryLimit it is failed
//     instead.
//   - reject (invalid message, identity conflict, a Decode error): moved to
//     failed, with failedReason "pginbox <reason>: <error>" and the reason in
//     the job's FieldReason field. BullMQ's failed set is the dead letter.
//
// The message ID is the job ID unless Config.IDField names a field of the
// job's data, or Config.Decode sets one.
//
// The package speaks BullMQ's Redis data model itself (there is no Go
// client), in Lua scripts that each make one atomic move. It supports
// standard, prioritized and delayed jobs and paused queues; not flows
// (parent and child jobs), rate limits, global concurrency or
// deduplication options: see README.md.
//
// Publisher is the other direction: an outbox.Publisher that adds a relay's
// events as BullMQ jobs with the event ID as the job ID, so BullMQ ignores
// a republished event while the first job exists; DecodeEvent maps its jobs
// back for the Consumer.
package bullmq
