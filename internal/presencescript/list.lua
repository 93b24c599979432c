-- list.lua: every server in one shard of the presence hash, for operators.
-- O(N) in the shard's size: not for hot paths.
--
-- KEYS[1]  the shard hash (fields as in beat.lua)
-- KEYS[2]  its owners hash (see beat.lua)
-- KEYS[3]  its load hash (see beat.lua)
-- ARGV[1]  TTL in milliseconds
--
-- Answers {proof, wait, loadErr, job1, expiresIn1, instance1, load1, ...}:
--   proof       1 when a missing or expired beat proves a server stopped (the
--               meta fields name this Redis run and it is at least one TTL
--               old), else 0 (see read.lua)
--   wait        when proof is 0, the least ms before it can become 1; else 0
--   expiresInN  ms until job N's beat expires on the Redis clock, negative when
--               it has expired (an unreadable value counts as expiry 0)
--   instanceN   the instance that wrote it ("" when none is recorded)
--   loadErr     "" when the load hash was read, else Redis's error (e.g.
--               WRONGTYPE: another tool wrote a value of another type there)
--   loadN       job N's entry of the load hash as stored ("" when none):
--               the caller parses it, and ignores it for a beat not alive
local key, owners, load, ttl = KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local run = ''
local info = redis.pcall('INFO', 'server') -- an error table where INFO is unsupported
if type(info) == 'string' then
  run = string.match(info, 'run_id:(%x+)') or ''
end

local inst = {}
local ow = redis.call('HGETALL', owners)
for i = 1, #ow, 2 do
  inst[ow[i]] = ow[i + 1]
end

local loads, loadErr = {}, ''
local lr = redis.pcall('HGETALL', load)
if type(lr) == 'table' and lr.err then
  loadErr = lr.err
else
  for i = 1, #lr, 2 do
    loads[lr[i]] = lr[i + 1]
  end
end

local all = redis.call('HGETALL', key)
local out = {1, 0, loadErr}
local metaRun, since = false, nil
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  if f == '\0run' then
    metaRun = v
  elseif f == '\0since' then
    since = tonumber(v)
  elseif string.byte(f, 1) ~= 0 then
    out[#out + 1] = f
    out[#out + 1] = (tonumber(v) or 0) - now
    out[#out + 1] = inst[f] or ''
    out[#out + 1] = loads[f] or ''
  end
end

if metaRun ~= run or since == nil then
  out[1], out[2] = 0, ttl
elseif now - since < ttl then
  out[1], out[2] = 0, ttl - (now - since)
end
return out
