-- send.lua: store a message for a profile, whether it is loaded anywhere or not.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox, a stream <record>:inbox (same slot)
-- ARGV[1]  the message body (opaque)
-- ARGV[2]  the most messages the inbox may hold
--
-- The message is an inbox entry whose id (Redis stream id: ms on the Redis clock, then a
-- sequence) names it; inbox.seq in the record counts the messages ever sent, so a holder
-- learns from any save's answer that there is something to pull. Three calls: HMGET,
-- XLEN, then XADD and HINCRBY.
--
-- Answers: {'OK', id, holderJob|'', holderToken|''}  (the holder, to notify)
--          {'FULL', count}                           nothing stored
local f = redis.call('HMGET', KEYS[1], 'lock.job', 'lock.token')
local n = redis.call('XLEN', KEYS[2])
if n >= tonumber(ARGV[2]) then
  return {'FULL', n}
end
local id = redis.call('XADD', KEYS[2], '*', 'b', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'inbox.seq', 1)
return {'OK', id, f[1] or '', f[2] or ''}
