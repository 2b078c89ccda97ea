package bullmq

import "github.com/redis/go-redis/v9"

// The Lua scripts below each make one of BullMQ's moves atomically, on the
// keys and fields BullMQ's own scripts use, so Node producers, Node workers,
// dashboards and this package see the same queue. Job keys are built from
// the queue's key prefix inside the scripts, as BullMQ does: in Redis
// Cluster the prefix needs a hash tag ("{bull}") so they share a slot.

// luaCommon is prepended to every script.
const luaCommon = `
local rcall = redis.call
-- maxEvents is the events stream's length limit from the queue's meta hash.
local function maxEvents(meta)
  return tonumber(rcall("HGET", meta, "opts.maxLenEvents")) or 10000
end
local function emit(events, meta, ...)
  rcall("XADD", events, "MAXLEN", "~", maxEvents(meta), "*", ...)
end
`

// takeScript promotes due delayed jobs, then moves the next job from wait
// (or else the highest priority from prioritized) to active, locks it with
// the caller's token and returns {jobId, job hash}; nil when the queue is
// paused or has nothing ready.
//
// KEYS: wait, active, prioritized, events, meta, marker, delayed, pc, paused.
// ARGV: job key prefix, now (ms), lock token, lock duration (ms), worker name.
var takeScript = redis.NewScript(luaCommon + `
local now = tonumber(ARGV[2])
local paused = rcall("HGET", KEYS[5], "paused")
local target = KEYS[1]
if paused then target = KEYS[9] end
-- Delayed jobs scored (due ms) * 0x1000 + counter are due up to now.
local due = rcall("ZRANGEBYSCORE", KEYS[7], 0, (now + 1) * 0x1000 - 1, "LIMIT", 0, 1000)
for _, id in ipairs(due) do
  rcall("ZREM", KEYS[7], id)
  local priority = tonumber(rcall("HGET", ARGV[1] .. id, "priority")) or 0
  if priority == 0 then
    rcall("LPUSH", target, id)
  else
    local n = rcall("INCR", KEYS[8])
    rcall("ZADD", KEYS[3], priority * 0x100000000 + n % 0x100000000, id)
  end
  rcall("HSET", ARGV[1] .. id, "delay", 0)
  emit(KEYS[4], KEYS[5], "event", "waiting", "jobId", id, "prev", "delayed")
end
if paused then return false end
local id = rcall("RPOPLPUSH", KEYS[1], KEYS[2])
-- Old BullMQ versions left "0:..." markers in wait.
while id and string.sub(id, 1, 2) == "0:" do
  rcall("LREM", KEYS[2], 1, id)
  id = rcall("RPOPLPUSH", KEYS[1], KEYS[2])
end
if not id then
  local p = rcall("ZPOPMIN", KEYS[3])
  if #p == 0 then return false end
  id = p[1]
  rcall("LPUSH", KEYS[2], id)
end
local job = ARGV[1] .. id
rcall("SET", job .. ":lock", ARGV[3], "PX", ARGV[4])
rcall("HSET", job, "processedOn", ARGV[2], "pb", ARGV[5])
rcall("HINCRBY", job, "ats", 1)
emit(KEYS[4], KEYS[5], "event", "active", "jobId", id, "prev", "waiting")
if rcall("LLEN", KEYS[1]) > 0 or rcall("ZCARD", KEYS[3]) > 0 then
  rcall("ZADD", KEYS[6], 0, "0")
end
return {id, rcall("HGETALL", job)}
`)

// Results of finishScript besides 0 (done), as BullMQ numbers them.
const (
	finishMissingJob  = -1 // the job hash is gone (removed)
	finishMissingLock = -2 // the lock expired
	finishNotActive   = -3 // the job is not in active
	finishLockNotOurs = -6 // another worker holds the lock
)

// finishScript moves a job this worker holds from active to completed or
// failed: it checks and releases the lock, records the result, keeps or
// removes the job as its removeOnComplete / removeOnFail option says (true,
// a count, or {count}), and emits the event. It returns 0 or a finish*
// code.
//
// KEYS: active, completed or failed set, events, stalled, meta.
// ARGV: job key prefix, job ID, lock token, now (ms), "completed" or
// "failed", the result field (returnvalue or failedReason), its value, the
// job option that says what to keep (removeOnComplete or removeOnFail),
// then field/value pairs to set on the job.
var finishScript = redis.NewScript(luaCommon + `
local id = ARGV[2]
local job = ARGV[1] .. id
if rcall("EXISTS", job) == 0 then return -1 end
local lock = rcall("GET", job .. ":lock")
if lock ~= ARGV[3] then
  if lock then return -6 end
  return -2
end
rcall("DEL", job .. ":lock")
rcall("SREM", KEYS[4], id)
if rcall("LREM", KEYS[1], -1, id) < 1 then return -3 end
rcall("HINCRBY", job, "atm", 1)
for i = 9, #ARGV, 2 do
  rcall("HSET", job, ARGV[i], ARGV[i + 1])
end
-- keep: nil keeps every job, 0 removes this one, n keeps the newest n.
local keep = nil
local ok, opts = pcall(cjson.decode, rcall("HGET", job, "opts") or "{}")
if ok and type(opts) == "table" then
  local v = opts[ARGV[8]]
  if v == true then keep = 0
  elseif type(v) == "number" then keep = v
  elseif type(v) == "table" and type(v["count"]) == "number" then keep = v["count"] end
end
local function removeJob(j)
  rcall("DEL", j, j .. ":logs", j .. ":dependencies", j .. ":processed", j .. ":failed", j .. ":unsuccessful")
end
if keep == 0 then
  removeJob(job)
else
  rcall("ZADD", KEYS[2], ARGV[4], id)
  rcall("HSET", job, ARGV[6], ARGV[7], "finishedOn", ARGV[4])
  if keep and keep > 0 then
    for _, old in ipairs(rcall("ZREVRANGE", KEYS[2], keep, -1)) do
      removeJob(ARGV[1] .. old)
    end
    rcall("ZREMRANGEBYRANK", KEYS[2], 0, -(keep + 1))
  end
end
emit(KEYS[3], KEYS[5], "event", ARGV[5], "jobId", id, ARGV[6], ARGV[7], "prev", "active")
return 0
`)

// stalledScript moves the active jobs whose lock expired (their worker
// crashed, or left them for a retry) back to wait, at its head, counting
// each move in the job's "stc" field, and returns their IDs.
//
// KEYS: active, wait, paused, events, meta, marker, stalled.
// ARGV: job key prefix.
var stalledScript = redis.NewScript(luaCommon + `
local paused = rcall("HGET", KEYS[5], "paused")
local target = KEYS[2]
if paused then target = KEYS[3] end
local moved = {}
for _, id in ipairs(rcall("LRANGE", KEYS[1], 0, -1)) do
  if string.sub(id, 1, 2) ~= "0:" and rcall("EXISTS", ARGV[1] .. id .. ":lock") == 0 then
    if rcall("LREM", KEYS[1], 1, id) > 0 then
      rcall("HINCRBY", ARGV[1] .. id, "stc", 1)
      rcall("SREM", KEYS[7], id)
      rcall("RPUSH", target, id)
      emit(KEYS[4], KEYS[5], "event", "stalled", "jobId", id)
      emit(KEYS[4], KEYS[5], "event", "waiting", "jobId", id, "prev", "active")
      moved[#moved + 1] = id
    end
  end
end
if #moved > 0 and not paused then rcall("ZADD", KEYS[6], 0, "0") end
return moved
`)

// addScript adds a job with a caller-chosen ID unless a job with that ID
// exists (then it emits "duplicated", as BullMQ does, and returns 0);
// otherwise it stores the job, queues it in wait (or paused) and returns 1.
//
// KEYS: wait, paused, meta, events, marker.
// ARGV: job key prefix, job ID, name, data (JSON), opts (JSON), now (ms).
var addScript = redis.NewScript(luaCommon + `
local id = ARGV[2]
local job = ARGV[1] .. id
if rcall("EXISTS", job) == 1 then
  emit(KEYS[4], KEYS[3], "event", "duplicated", "jobId", id)
  return 0
end
rcall("HSET", job, "name", ARGV[3], "data", ARGV[4], "opts", ARGV[5], "timestamp", ARGV[6], "delay", 0, "priority", 0)
emit(KEYS[4], KEYS[3], "event", "added", "jobId", id, "name", ARGV[3])
local paused = rcall("HGET", KEYS[3], "paused")
if paused then
  rcall("LPUSH", KEYS[2], id)
else
  rcall("LPUSH", KEYS[1], id)
  rcall("ZADD", KEYS[5], 0, "0")
end
emit(KEYS[4], KEYS[3], "event", "waiting", "jobId", id)
return 1
`)
