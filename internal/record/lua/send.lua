-- send.lua: store a message for a profile, whether it is loaded anywhere or not.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox, a stream <record>:inbox (same slot)
-- KEYS[3]  its idempotency keys, a hash <record>:idem: sender's key =
--          "<message id> <body digest> <ms stored>" (a key stored before digests were
--          kept holds the message id alone: any body repeats it)
-- KEYS[4]  the keys' sweep order, a sorted set <record>:idem.at: key scored by the ms it
--          was stored; +inf while its message is dead-lettered (save.lua pins it); a key
--          whose message still waits past its window is scored so that it is looked at
--          again a minute later
-- ARGV[1]  the message body (opaque)
-- ARGV[2]  the most messages the inbox may hold
-- ARGV[3]  the sender's idempotency key, or '' for none
-- ARGV[4]  how long (ms) an idempotency key is remembered after its send (the window)
-- ARGV[5]  the most idempotency keys the profile remembers
-- ARGV[6]  the body's digest (with a key; '' without)
-- ARGV[7]  the entry's checksum (CRC-32C of ARGV[3] and ARGV[1]: record.EntrySum), kept as
--          its field c: whoever reads the message checks it
--
-- The message is an inbox entry whose id (Redis stream id: ms on the Redis clock, then a
-- sequence) names it; inbox.seq in the record counts the messages ever sent, so a holder
-- learns from any save's answer that there is something to pull.
--
-- An idempotency key names one message of the profile. The profile remembers it for the
-- window after its send, and always while its message waits in the inbox or lies in the
-- dead letters; past that it is forgotten, by time alone (the lookup itself decides, so
-- whether other sends came in between changes nothing). A send with a remembered key
-- stores nothing: with the same body it answers the first send's id (DUP), with another
-- body it is refused (CONFLICT). At MaxIdempotencyKeys keys a new keyed send is refused
-- (KEYS) rather than forget a key that is still remembered. Forgetting is bounded work: a
-- few keys past their window per keyed send (more when the bound is reached).
--
-- Answers: {'OK', id, holderJob|'', holderToken|''}   stored (the holder, to notify)
--          {'DUP', id, holderJob|'', holderToken|'', state}
--                                                     an earlier send with this key and
--                                                     body stored id; state: 'waiting' (in
--                                                     the inbox), 'dead' (a dead letter),
--                                                     'applied'
--          {'CONFLICT', id}                           the key names message id, whose body
--                                                     is another; nothing stored
--          {'KEYS', count}                            the profile remembers count keys, the
--                                                     most allowed; nothing stored
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
local key, window, now = ARGV[3], tonumber(ARGV[4]), 0

-- A key's entry: its message id, body digest ('' unknown) and send time (nil unknown).
local function entry(k)
  local v = redis.call('HGET', idem, k)
  if not v then
    return nil
  end
  local id, digest, at = string.match(v, '^(%S+) (%S*) (%d+)$')
  if not id then
    return v, '', nil
  end
  return id, digest, tonumber(at)
end
local function waiting(id)
  return #redis.call('XRANGE', inbox, id, id) > 0
end
local function forget(k)
  redis.call('HDEL', idem, k)
  redis.call('ZREM', idemAt, k)
end

if key ~= '' then
  for _, k in ipairs({{idem, 'hash', 'idem'}, {idemAt, 'zset', 'idem.at'}}) do
    local ty = redis.call('TYPE', k[1])['ok']
    if ty ~= k[2] and ty ~= 'none' then
      return {'CORRUPT', k[3], 'the idempotency key ' .. k[2] .. ' is a ' .. ty}
    end
  end
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
  local id, digest, at = entry(key)
  local score = redis.call('ZSCORE', idemAt, key)
  if (id ~= nil) ~= (score ~= false) then
    return {'CORRUPT', 'idem', 'the idempotency key ' .. string.format('%q', key) .. ' is in one of ' .. idem ..
      ' and ' .. idemAt .. ' only'}
  end
  if id then
    local ms, sq = string.match(id, '^(%d+)%-(%d+)$')
    if not ms or (#ms > 1 and string.sub(ms, 1, 1) == '0') or (#sq > 1 and string.sub(sq, 1, 1) == '0')
      or not string.match(digest, '^%x*$') then
      return {'CORRUPT', 'idem', 'the idempotency key names ' .. string.format('%q', id) .. ', not a message id'}
    end
    local state = 'applied'
    local e = redis.call('XRANGE', inbox, id, id)
    if #e == 1 then
      local k = nil
      for j = 1, #e[1][2], 2 do
        if e[1][2][j] == 'k' then
          k = e[1][2][j + 1]
        end
      end
      if k ~= key then
        return {'CORRUPT', 'idem', 'the idempotency key names message ' .. id .. ', sent under another key'}
      end
    end
    if score == 'inf' or score == '+inf' then
      state = 'dead'
    elseif #e == 1 then
      state = 'waiting'
    end
    at = at or tonumber(score)
    if state ~= 'applied' or (at and now - at < window) then
      if digest ~= '' and digest ~= ARGV[6] then
        return {'CONFLICT', id}
      end
      return {'DUP', id, f[1] or '', f[2] or '', state}
    end
    forget(key) -- applied, and past its window: forgotten
  end
end
if n >= tonumber(ARGV[2]) then
  return {'FULL', n}
end
if key ~= '' then
  -- Forget a few keys past their window whose message neither waits nor lies dead (a
  -- dead letter's key scores +inf and is never among them); one whose message waits is
  -- looked at again a minute later. At the bound, look further before refusing.
  local most = tonumber(ARGV[5])
  local count = redis.call('ZCARD', idemAt)
  local limit = 4
  if count >= most then
    limit = 32
  end
  for _, k in ipairs(redis.call('ZRANGEBYSCORE', idemAt, '-inf', now - window, 'LIMIT', 0, limit)) do
    local id = entry(k)
    if id and waiting(id) then
      redis.call('ZADD', idemAt, now - window + 60000, k)
    else
      forget(k)
      count = count - 1
    end
  end
  if count >= most then
    return {'KEYS', count}
  end
end
local id
if key ~= '' then
  id = redis.call('XADD', inbox, '*', 'b', ARGV[1], 'k', key, 'c', ARGV[7])
  redis.call('HSET', idem, key, id .. ' ' .. ARGV[6] .. ' ' .. now)
  redis.call('ZADD', idemAt, now, key)
else
  id = redis.call('XADD', inbox, '*', 'b', ARGV[1], 'c', ARGV[7])
end
redis.call('HINCRBY', rec, 'inbox.seq', 1)
return {'OK', id, f[1] or '', f[2] or ''}
