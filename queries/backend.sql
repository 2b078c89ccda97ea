-- name: BackendTerminate :one
-- Ends the session of a handler the worker abandoned (hung past its deadline,
-- or still running when Stop gave up), so its transaction rolls back and frees
-- the receipt now instead of at the session's idle timeout. A role may end
-- its own sessions.
SELECT pg_terminate_backend(sqlc.arg(pid)::integer);
