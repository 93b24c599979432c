-- free.lua: the operator's free of a lock (`playerdata unlock`, and `playerdata repair
-- --force` for a lock that names no holder), once the caller judged that it may change
-- hands (internal/lockrule): its holder is proven stopped after the lock was written, no
-- live server can hold its token, or, without the presence flag, it is older than
-- LockTTL+LockSkew. The judgment was made on what the caller read; this script frees
-- exactly that lock, or nothing.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- ARGV[1]  the lock token the caller judged (non-empty)
-- ARGV[2]  the lock.job the caller read with it ('' for a lock that names no holder)
-- ARGV[3]  max age in ms (LockTTL+LockSkew) when the judgment was the age rule, else '0':
--          the lock is then freed only while it still carries no presence flag, its
--          lock.at is an integer and it is older than that on this Redis's clock (a save
--          of a live holder since the read refreshed it: nothing changes)
--
-- The free writes what a release writes to the lock (lock.token and lock.job empty,
-- lock.at the Redis time) and removes lock.presence, released and released.ver: no write
-- under the freed token, nor a release retried under it, can recognise the lock as its
-- own afterwards (save.lua's own-release rule). The data, ver, epoch, a pending trade and
-- everything beside the record are left as they are.
--
-- Answers:
--   {1}               freed
--   {2, job, token}   the lock is not the one judged (another holder or token); nothing
--                     changed
--   {3, own}          the lock is free already; nothing changed (own 1: its last release was
--                     under the token judged: its holder released it itself)
--   {4, age}          the age rule no longer holds (age in ms, -1 when lock.at is not an
--                     integer; or the lock carries the presence flag now); nothing changed
--   {5}               there is no record
local rec = KEYS[1]
local f = redis.pcall('HMGET', rec, 'lock.token', 'lock.job', 'lock.at', 'lock.presence', 'epoch', 'released')
if f.err then
  return {5}
end
if not f[1] and not f[5] then
  return {5}
end
local token, job = f[1] or '', f[2] or ''
if token == '' then
  return {3, f[6] == ARGV[1] and 1 or 0}
end
if token ~= ARGV[1] or job ~= ARGV[2] then
  return {2, job, token}
end
local t = redis.call('TIME')
local maxAge = tonumber(ARGV[3])
if maxAge > 0 then
  local at = f[3]
  if f[4] == '1' or not at or not string.match(at, '^%d+$') or #at > 15 then
    return {4, -1}
  end
  local age = t[1] * 1000 + math.floor(t[2] / 1000) - tonumber(at)
  if age <= maxAge then
    return {4, age}
  end
end
local now = t[1] .. string.sub(string.rep('0', 6 - #t[2]) .. t[2], 1, 3)
redis.call('HSET', rec, 'lock.token', '', 'lock.job', '', 'lock.at', now)
redis.call('HDEL', rec, 'lock.presence', 'released', 'released.ver')
return {1}
