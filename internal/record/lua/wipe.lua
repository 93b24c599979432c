-- wipe.lua: erase a profile: its record (data, lock) and every key beside it (inbox,
-- history, refusal counts, dead letters, idempotency keys), for an erasure request.
-- Fenced: it erases only under the lock the caller holds, so a wipe never frees a lock
-- whose holder lives (the caller took the lock the way a join does: its holder released
-- it, or was proven stopped).
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2..] the keys beside it (same slot)
-- ARGV[1..] the lock tokens of the caller's session of the profile: its own, then earlier
--          ones an adoption has not moved yet
--
-- UNLINK: a big profile's history (tens of MiB) is freed in the background, not while
-- Redis holds every other client.
--
-- Answers:
--   {'OK', n}        erased: n keys deleted
--   {'LOST', token}  the lock is not the caller's (token: the lock's, '' when free or no
--                    record); nothing changed
local tok = redis.pcall('HGET', KEYS[1], 'lock.token')
if type(tok) == 'table' and tok.err then
  tok = false -- not a hash: it is not the caller's lock
end
local mine = false
for _, t in ipairs(ARGV) do
  if tok == t then
    mine = true
  end
end
if not mine then
  return {'LOST', tok or ''}
end
return {'OK', redis.call('UNLINK', unpack(KEYS))}
