-- drainhold.lua: a drain's headroom reservation (seed 000): where one drain sends its
-- profiles, chosen against the peers' session counts plus every other live drain's
-- holds, and held for ttl on this Redis's clock, so that concurrent drains do not pile
-- onto one peer. One hash of holds per namespace; a field per (target, drainer).
--
-- KEYS[1]  the holds hash <ns>:drain.holds: field "<target>\0<drainer>" =
--          "<count>,<expiry ms>"
-- ARGV[1]  the drainer's JobID
-- ARGV[2]  ttl in ms: the hold's life (set past the drain's end; a crashed drainer's hold
--          lapses then); 0 retires the drainer's holds and places nothing
-- ARGV[3]  how many profiles to place
-- ARGV[4..] target JobID, its session count, ... (the live peers)
--
-- Expired holds are deleted. Each profile goes to the target with the least count plus
-- live holds (other drains') plus what this call placed there (ties: the first listed),
-- never to a target that is itself draining (it has a live hold, or its mark "\0<drainer>"),
-- unless every target is. The drainer's holds are replaced by what it placed.
--
-- Answer: {target, placed, ...} for every target listed, in order.
local holds, me = KEYS[1], ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, n = tonumber(ARGV[2]), tonumber(ARGV[3])
local load, order, placed = {}, {}, {}
for i = 4, #ARGV, 2 do
  load[ARGV[i]] = tonumber(ARGV[i + 1]) or 0
  order[#order + 1] = ARGV[i]
  placed[ARGV[i]] = 0
end
local ty = redis.call('TYPE', holds)['ok']
if ty ~= 'hash' and ty ~= 'none' then
  return redis.error_reply('drain holds key ' .. holds .. ' is a ' .. ty)
end
local all = redis.call('HGETALL', holds)
local draining = {} -- the drainers with a live hold: no target for another drain
for i = 1, #all, 2 do
  local field, v = all[i], all[i + 1]
  local target, drainer = string.match(field, '^(.*)%z(.*)$')
  local count, expiry = string.match(v, '^(%d+),(%d+)$')
  if not target or not count or tonumber(expiry) <= now or drainer == me then
    redis.call('HDEL', holds, field)
  else
    draining[drainer] = true
    if load[target] then
      load[target] = load[target] + tonumber(count)
    end
  end
end
if ttl <= 0 then
  return {}
end
local open = {}
for _, target in ipairs(order) do
  if not draining[target] then
    open[#open + 1] = target
  end
end
if #open == 0 then
  open = order
end
for _ = 1, n do
  local best
  for _, target in ipairs(open) do
    if not best or load[target] + placed[target] < load[best] + placed[best] then
      best = target
    end
  end
  if best then
    placed[best] = placed[best] + 1
  end
end
local out = {}
redis.call('HSET', holds, '\0' .. me, '0,' .. (now + ttl)) -- marks this drainer as draining
for _, target in ipairs(order) do
  if placed[target] > 0 then
    redis.call('HSET', holds, target .. '\0' .. me, placed[target] .. ',' .. (now + ttl))
  end
  out[#out + 1] = target
  out[#out + 1] = placed[target]
end
redis.call('PEXPIRE', holds, ttl > 0 and ttl or 1000)
return out
