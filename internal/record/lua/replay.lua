-- replay.lua: try messages of a profile again, on an operator's word (after what made
-- OnMessage refuse them was mended): move dead letters back to the inbox, and have the
-- refusals of messages still waiting in the inbox start over.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox, a stream <record>:inbox
-- KEYS[3]  its dead letters, a stream <record>:dead
-- KEYS[4]  its refusal counts, a hash <record>:tries (see save.lua)
-- KEYS[5]  its idempotency keys, a hash <record>:idem (see send.lua)
-- KEYS[6]  their sweep order, a sorted set <record>:idem.at (see send.lua)
-- ARGV[1..] ids: of dead letters, or of messages waiting in the inbox; none: every dead
--          letter (at most 1000 per call) and every waiting message refused at least once.
--          An id that is neither is passed over.
--
-- A dead letter goes back with its body, idempotency key and checksum, under a new inbox id, its
-- refusal count starting over (it was dropped when the message was dead-lettered); its
-- key, pinned while the message lay dead, names the new id and is remembered for its
-- window and while the message waits again. MaxInbox does not apply: the operator chose
-- to put these back. A waiting message stays where it is, its refusal count dropped.
-- inbox.seq grows (by the messages moved, and by one when waiting ones were named), so a
-- holder pulls at its next save: what it pulls it tries again at once.
--
-- Answers: {moved, holderJob|'', holderToken|'', retried}
--          {'CORRUPT', field, why}  a key is not what this library writes; nothing changed
local rec, inbox, dead, tries, idem, idemAt = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local f = redis.pcall('HMGET', rec, 'lock.job', 'lock.token')
if f.err then
  return {'CORRUPT', '(record)', 'the record key is not a hash'}
end
for _, k in ipairs({{inbox, 'stream', 'inbox'}, {dead, 'stream', 'dead'}, {tries, 'hash', 'tries'},
  {idem, 'hash', 'idem'}, {idemAt, 'zset', 'idem.at'}}) do
  local ty = redis.call('TYPE', k[1])['ok']
  if ty ~= k[2] and ty ~= 'none' then
    return {'CORRUPT', k[3], 'not a ' .. k[2]}
  end
end
-- Whether stream s holds entry id (an id that is not a stream id is in none).
local function entryOf(s, id)
  local e = redis.pcall('XRANGE', s, id, id)
  if e.err or #e == 0 then
    return nil
  end
  return e[1]
end
local function waiting(id)
  return entryOf(inbox, id) ~= nil
end
local entries, retry = {}, {}
if #ARGV == 0 then
  entries = redis.call('XRANGE', dead, '-', '+', 'COUNT', 1000)
  for _, name in ipairs(redis.call('HKEYS', tries)) do
    if not string.find(name, ':', 1, true) and waiting(name) then
      retry[#retry + 1] = name
    end
  end
else
  for _, id in ipairs(ARGV) do
    local e = entryOf(dead, id)
    if e then
      entries[#entries + 1] = e
    elseif waiting(id) then
      retry[#retry + 1] = id
    end
  end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local moved = 0
for _, e in ipairs(entries) do
  local add, was, k = {'XADD', inbox, '*'}, nil, nil
  for i = 1, #e[2], 2 do
    local name, value = e[2][i], e[2][i + 1]
    if name == 'b' or name == 'k' or name == 'c' then
      add[#add + 1] = name
      add[#add + 1] = value
    end
    if name == 'k' then
      k = value
    elseif name == 'id' then
      was = value
    end
  end
  if #add == 3 then
    add[4], add[5] = 'b', ''
  end
  local id = redis.call(unpack(add))
  redis.call('XDEL', dead, e[1])
  moved = moved + 1
  if k then
    -- The key names the message again, under its new id: unless a later send took it
    -- (a key forgotten by an older version while its message lay dead).
    local v = redis.call('HGET', idem, k)
    local first, digest, at = nil, '', nil
    if v then
      first, digest, at = string.match(v, '^(%S+) (%S*) (%d+)$')
      if not first then
        first, digest = v, ''
      end
    end
    if not v or first == was then
      at = tonumber(at) or now
      redis.call('HSET', idem, k, id .. ' ' .. digest .. ' ' .. at)
      redis.call('ZADD', idemAt, at, k)
    end
  end
end
for _, id in ipairs(retry) do
  redis.call('HDEL', tries, id, id .. ':err', id .. ':job')
end
local seq = moved
if #retry > 0 then
  seq = seq + 1
end
if seq > 0 then
  redis.call('HINCRBY', rec, 'inbox.seq', seq)
end
return {moved, f[1] or '', f[2] or '', #retry}
