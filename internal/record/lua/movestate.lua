-- movestate.lua: what a move's target (or a source whose flip got no answer) reads to
-- learn whether the flip landed: the lock and the data's version, with the Redis time of
-- the read taken on the record's own node (the clock the flip's expiry is checked on,
-- also on Redis Cluster). Read-only.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
--
-- Answer: {seconds, microseconds, lock.token, ver, epoch, at, move.id, inbox.seq,
-- lock.job}, each field false when absent (or when the key is not a hash).
local t = redis.call('TIME')
local f = redis.pcall('HMGET', KEYS[1], 'lock.token', 'ver', 'epoch', 'at', 'move.id', 'inbox.seq', 'lock.job')
if f.err then
  f = {}
end
return {t[1], t[2], f[1] or false, f[2] or false, f[3] or false, f[4] or false, f[5] or false, f[6] or false,
  f[7] or false}
