-- send.lua: store a message for a profile, whether it is loaded anywhere or not.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox, a stream <record>:inbox (same slot)
-- KEYS[3]  its idempotency keys, a hash <record>:idem: sender's key = the message id
-- KEYS[4]  when each was stored, a sorted set <record>:idem.at: key scored by ms (+inf
--          while its message is dead-lettered, so the key outlives the window then)
-- ARGV[1]  the message body (opaque)
-- ARGV[2]  the most messages the inbox may hold
-- ARGV[3]  the sender's idempotency key, or '' for none
-- ARGV[4]  how long (ms) an idempotency key is remembered
-- ARGV[5]  the most idempotency keys remembered for the profile
-- ARGV[6]  the entry's checksum (CRC-32C of ARGV[3] and ARGV[1]: record.EntrySum), kept as
--          its field c: whoever reads the message checks it
--
-- The message is an inbox entry whose id (Redis stream id: ms on the Redis clock, then a
-- sequence) names it; inbox.seq in the record counts the messages ever sent, so a holder
-- learns from any save's answer that there is something to pull. A send with an
-- idempotency key the profile remembers stores nothing and answers the first send's id,
-- whether that message was applied yet or not: a key is remembered for ARGV[4] after its
-- send, and always while its message waits in the inbox or is dead-lettered; past
-- ARGV[5] keys the oldest go first (never one whose message waits). Forgetting is
-- bounded work: a few keys per send.
--
-- Answers: {'OK', id, holderJob|'', holderToken|''}   stored (the holder, to notify)
--          {'DUP', id, holderJob|'', holderToken|''}  an earlier send with this key stored id
--          {'FULL', count}                            nothing stored
--          {'CORRUPT', field, why}                    a key or field is not what this library
--                                                     writes (an idempotency key that names no
--                                                     stream id, or a waiting message sent
--                                                     under another key); nothing stored
local rec, inbox, idem, idemAt = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local f = redis.pcall('HMGET', rec, 'lock.job', 'lock.token', 'inbox.seq')
if f.err then
  return {'CORRUPT', '(record)', 'the record key is not a hash'}
end
if f[3] and (not string.match(f[3], '^%d+$') or #f[3] > 15) then
  return {'CORRUPT', 'inbox.seq', 'not an integer'}
end
local n = redis.pcall('XLEN', inbox)
if type(n) == 'table' and n.err then
  return {'CORRUPT', 'inbox', 'the inbox key is not a stream'}
end
-- An inbox stays once a message was ever sent, and with it the record that counts it: an
-- inbox without its record is what is left of a deleted one, which a message must not make
-- again as a new profile (its next join would get Defaults at epoch 1).
if not f[3] and redis.call('EXISTS', inbox) == 1 and redis.call('EXISTS', rec) == 0 then
  return {'CORRUPT', '(record)', 'missing while its inbox remains (deleted or evicted)'}
end
local key = ARGV[3]
if key ~= '' then
  local ty = redis.call('TYPE', idem)['ok']
  if ty ~= 'hash' and ty ~= 'none' then
    return {'CORRUPT', 'idem', 'the idempotency key hash is a ' .. ty}
  end
  ty = redis.call('TYPE', idemAt)['ok']
  if ty ~= 'zset' and ty ~= 'none' then
    return {'CORRUPT', 'idem.at', 'the idempotency key times are a ' .. ty}
  end
  local first = redis.call('HGET', idem, key)
  if (first ~= false) ~= (redis.call('ZSCORE', idemAt, key) ~= false) then
    return {'CORRUPT', 'idem', 'the idempotency key ' .. string.format('%q', key) .. ' is in one of ' .. idem ..
      ' and ' .. idemAt .. ' only'}
  end
  if first then
    local ms, sq = string.match(first, '^(%d+)%-(%d+)$')
    if not ms or (#ms > 1 and string.sub(ms, 1, 1) == '0') or (#sq > 1 and string.sub(sq, 1, 1) == '0') then
      return {'CORRUPT', 'idem', 'the idempotency key names ' .. string.format('%q', first) .. ', not a message id'}
    end
    local e = redis.call('XRANGE', inbox, first, first)
    if #e == 1 then
      local k = nil
      for j = 1, #e[1][2], 2 do
        if e[1][2][j] == 'k' then
          k = e[1][2][j + 1]
        end
      end
      if k ~= key then
        return {'CORRUPT', 'idem', 'the idempotency key names message ' .. first .. ', sent under another key'}
      end
    end
    return {'DUP', first, f[1] or '', f[2] or ''}
  end
end
if n >= tonumber(ARGV[2]) then
  return {'FULL', n}
end
local id
if key ~= '' then
  id = redis.call('XADD', inbox, '*', 'b', ARGV[1], 'k', key, 'c', ARGV[6])
else
  id = redis.call('XADD', inbox, '*', 'b', ARGV[1], 'c', ARGV[6])
end
redis.call('HINCRBY', rec, 'inbox.seq', 1)
if key ~= '' then
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  redis.call('HSET', idem, key, id)
  redis.call('ZADD', idemAt, now, key)
  -- Forget a few keys past the window, then the oldest beyond the bound; never one whose
  -- message still waits.
  local function forget(k)
    local mid = redis.call('HGET', idem, k)
    if mid and #redis.call('XRANGE', inbox, mid, mid) > 0 then
      return false
    end
    redis.call('HDEL', idem, k)
    redis.call('ZREM', idemAt, k)
    return true
  end
  for _, k in ipairs(redis.call('ZRANGEBYSCORE', idemAt, '-inf', now - tonumber(ARGV[4]), 'LIMIT', 0, 4)) do
    forget(k)
  end
  local over = redis.call('ZCARD', idemAt) - tonumber(ARGV[5])
  if over > 0 then
    for _, k in ipairs(redis.call('ZRANGE', idemAt, 0, math.min(over, 4) - 1)) do
      forget(k)
    end
  end
end
return {'OK', id, f[1] or '', f[2] or ''}
