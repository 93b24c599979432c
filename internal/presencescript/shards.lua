-- shards.lua: the shard counts in use in a deployment, for telling a
-- server or reader configured with another count.
--
-- KEYS[1]  the layout hash of the presence hash: <count> = Redis time (ms)
--          until which a server using that shard count is known to run
-- ARGV[1]  the caller's shard count
-- ARGV[2]  how long (ms) to mark it in use; 0 only reads (a reader)
--
-- A server marks its count on each full check (at least every CheckEvery
-- beats), for longer than that, so the mark of a running count never
-- lapses; expired marks are dropped. Answers {now, count1, until1, ...}:
-- the Redis time (ms) and every live mark, the caller's included.
local key, count, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if ttl > 0 then
  redis.call('HSET', key, count, string.format('%.0f', now + ttl))
end
local out = {now}
local all = redis.call('HGETALL', key)
for i = 1, #all, 2 do
  local u = tonumber(all[i + 1])
  if u == nil or u <= now then
    if ttl > 0 then
      redis.call('HDEL', key, all[i])
    end
  elseif tonumber(all[i]) ~= nil then
    out[#out + 1] = tonumber(all[i])
    out[#out + 1] = u
  end
end
return out
