-- move.lua: compare-and-set a trade's state: the one commit point (PREPARED -> COMMITTED)
-- and every abort (PREPARED -> ABORTED, or no entry -> ABORTED).
--
-- KEYS[1]  the journal hash <ns>:trade:{<id>}
-- ARGV[1]  expected state: 'PREPARED', or '' for "no entry" (a participant's recovery
--          found its record marked with a trade nobody opened a journal for)
-- ARGV[2]  new state: 'COMMITTED' or 'ABORTED'
-- ARGV[3]  retention in ms: an ABORTED entry expires this long after it is set
--
-- An entry created from nothing holds only state=ABORTED (a tombstone: a begin for that
-- id arriving later answers EXISTS). A COMMITTED entry loses the expiry its PREPARED
-- state had: it lives until every participant is marked settled (settled.lua).
--
-- Answers: {'OK'} | {'STATE', current}  (current is '' when there is no entry)
local j = KEYS[1]
local state = redis.call('HGET', j, 'state') or ''
if state ~= ARGV[1] then
  return {'STATE', state}
end
redis.call('HSET', j, 'state', ARGV[2])
if ARGV[2] == 'ABORTED' then
  redis.call('PEXPIRE', j, ARGV[3])
else
  redis.call('PERSIST', j)
end
return {'OK'}
