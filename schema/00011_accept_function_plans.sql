-- Schema v11: pginbox_accept plans its statements at every call.
--
-- On Citus the function runs on the scope's node, in the session the
-- coordinator keeps there. Citus 13.2 caches a shard plan for a reused
-- (generic) plan of a routed statement but never finds it again: each call
-- planned both inserts anew and added the plan to the session's cache, about
-- 100 KB per accept the node's backend kept until the connection closed.
-- Citus keeps nothing for a custom plan, so the function uses custom plans;
-- measured on the node, a call also took half the time. One server never
-- calls the function: the setting changes nothing there.

-- +goose Up
ALTER FUNCTION pginbox_accept(uuid, text, text, text, text, text, text, integer, bytea, json, jsonb, integer)
    SET plan_cache_mode = force_custom_plan;

-- +goose Down
ALTER FUNCTION pginbox_accept(uuid, text, text, text, text, text, text, integer, bytea, json, jsonb, integer)
    RESET plan_cache_mode;
