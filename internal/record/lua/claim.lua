-- claim.lua: claim an idempotency key for one profile of a namespace, before its send.
--
-- KEYS[1]  the claim <ns>:idem.claim:<idempotency key>, a hash: d = the driver's name,
--          k = the profile key, b = the body digest of the send that made it. It expires
--          the window after it was made (PEXPIRE, on the Redis clock), and is never extended.
-- ARGV[1]  the driver's name
-- ARGV[2]  the profile key
-- ARGV[3]  the body digest (record.BodyDigest)
-- ARGV[4]  the window (ms, at least 1)
--
-- A key names one message of the namespace. send.lua remembers it per profile (the body, the
-- message id), but on Redis Cluster a script sees one profile's slot only: this claim is the
-- namespace-wide half, run on its own just before send.lua. It decides only whether the key
-- belongs to this (driver, profile key): the profile's send.lua then decides the rest (a
-- duplicate, another body, a first send that never stored), so a claim that was made by a
-- send that failed afterwards lets its retries through.
--
-- Answers: {'CLAIMED'}                      the key was free: it names (driver, key) now
--          {'SAME'}                         it names (driver, key) already: send.lua decides
--          {'OTHER', driver, key, digest}   it names a message of another profile (or driver),
--                                           whose body had digest; nothing written
--          {'CORRUPT', why}                 the claim is not what this library writes;
--                                           nothing written
local claim = KEYS[1]
local f = redis.pcall('HMGET', claim, 'd', 'k', 'b')
if f.err then
  return {'CORRUPT', 'not a hash'}
end
if not f[1] and not f[2] and not f[3] then
  if redis.call('EXISTS', claim) == 1 then
    return {'CORRUPT', 'a hash without its fields d, k and b'}
  end
  redis.call('HSET', claim, 'd', ARGV[1], 'k', ARGV[2], 'b', ARGV[3])
  redis.call('PEXPIRE', claim, ARGV[4])
  return {'CLAIMED'}
end
if not f[1] or not f[2] then
  return {'CORRUPT', 'its field d or k is missing'}
end
if f[1] == ARGV[1] and f[2] == ARGV[2] then
  return {'SAME'}
end
return {'OTHER', f[1], f[2], f[3] or ''}
