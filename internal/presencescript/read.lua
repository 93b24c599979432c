-- read.lua: tell whether one server's presence beat is live, on the Redis clock.
--
-- KEYS[1]  the server's shard of the presence hash (fields as in beat.lua)
-- ARGV[1]  JobID to read
-- ARGV[2]  TTL in milliseconds
--
-- Answers {code, ms, now}, now being the Redis time of the read (ms):
--   {1, remaining, now}  alive: the beat expires in `remaining` ms (> 0)
--   {2, ago, now}        stopped: no live beat, and this Redis run has been seen
--                        for at least one TTL, so a live server would have beaten
--                        into it; `ago` is how long ago (ms) its last beat
--                        expired, -1 when no beat of it is left (removed at a
--                        clean shutdown, or cleaned)
--   {0, wait, now}       unknown: no live beat, but that is no proof: the meta
--                        fields are missing, name another Redis run (restart or
--                        failover), or this run is younger than one TTL; `wait`
--                        is the least time in ms before the answer can become
--                        stopped
-- An alive answer costs two Redis commands (TIME, HGET); the others read the
-- run id (INFO server) and the run meta too.
local key, job, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local v = tonumber(redis.call('HGET', key, job))
if v ~= nil and v > now then
  return {1, v - now, now}
end

local run = ''
local info = redis.pcall('INFO', 'server') -- an error table where INFO is unsupported
if type(info) == 'string' then
  run = string.match(info, 'run_id:(%x+)') or ''
end

local meta = redis.call('HMGET', key, '\0run', '\0since')
local since = tonumber(meta[2])
if meta[1] ~= run or since == nil then
  return {0, ttl, now}
end
if now - since < ttl then
  return {0, ttl - (now - since), now}
end
if v == nil then
  return {2, -1, now}
end
return {2, now - v, now}
