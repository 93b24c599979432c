-- prepare.lua: mark a profile record as held by a trade (the prepare step), fenced by
-- the lock token.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- ARGV[1]  lock token of the coordinator's profile
-- ARGV[2]  trade id
-- ARGV[3]  the record version the coordinator's data is based on
--
-- While the mark is set every write but the trade's own settle (and a bare release that
-- writes no data) is refused, so the image the trade computed cannot be overwritten or
-- based on stale data; a later load resolves the mark from the journal.
--
-- Answers: {'OK'} (marked, or already marked with this id) | {'LOST', job}
--          | {'TRADE', otherId} | {'VER', ver}
local rec = KEYS[1]
local f = redis.call('HMGET', rec, 'lock.token', 'lock.job', 'trade', 'ver')
if f[1] ~= ARGV[1] then
  return {'LOST', f[2] or ''}
end
if f[3] and f[3] ~= '' then
  if f[3] == ARGV[2] then
    return {'OK'}
  end
  return {'TRADE', f[3]}
end
if (tonumber(f[4]) or 0) ~= tonumber(ARGV[3]) then
  return {'VER', f[4] or '0'}
end
redis.call('HSET', rec, 'trade', ARGV[2])
return {'OK'}
