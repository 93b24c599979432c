-- The beat script as it was before the fast path (INFO on every beat),
-- kept only so that BenchmarkBeatLoad can measure both. Not used otherwise.
-- beat.lua: write one presence beat, keep the run meta current, clean a few
-- expired fields. O(1) work: one TIME, one INFO, at most three HDELs.
--
-- KEYS[1]  the presence hash
-- ARGV[1]  JobID of the beating server (non-empty, never starts with "\0")
-- ARGV[2]  TTL in milliseconds
--
-- Fields: <JobID> = expiry in ms on the Redis clock (TIME at the beat + TTL);
-- "\0run" = run_id of the Redis process that wrote "\0since" ("" when INFO has
-- none, e.g. miniredis); "\0since" = Redis time (ms) since which that run has
-- been seen. Meta names start with a NUL byte, which no JobID may.
--
-- Answers {expiresAt, reset}: expiresAt is this beat's expiry (ms, Redis
-- clock); reset is 1 when the meta fields were missing or named another run and
-- this beat rewrote them (a Redis restart or failover), else 0. An unreadable
-- "\0since" counts as missing.
local key, job, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local run = ''
local info = redis.pcall('INFO', 'server') -- an error table where INFO is unsupported
if type(info) == 'string' then
  run = string.match(info, 'run_id:(%x+)') or ''
end

local reset = 0
local meta = redis.call('HMGET', key, '\0run', '\0since')
if meta[1] ~= run or not tonumber(meta[2]) then
  redis.call('HSET', key, '\0run', run, '\0since', string.format('%.0f', now))
  reset = 1
end

local expires = now + ttl
redis.call('HSET', key, job, string.format('%.0f', expires))

-- Bounded cleaning: look at three random fields and drop the expired (or
-- unreadable) ones. Correctness never depends on it; it only keeps the hash
-- from growing with the JobIDs of servers that are gone.
local sample = redis.call('HRANDFIELD', key, 3, 'WITHVALUES')
for i = 1, #sample, 2 do
  local f = sample[i]
  if string.byte(f, 1) ~= 0 then
    local v = tonumber(sample[i + 1])
    if v == nil or v < now then
      redis.call('HDEL', key, f)
    end
  end
end

return {expires, reset}
