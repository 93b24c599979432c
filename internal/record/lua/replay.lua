-- replay.lua: move dead-lettered messages of a profile back to its inbox (an operator's
-- decision, after what made OnMessage refuse them was mended).
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox, a stream <record>:inbox
-- KEYS[3]  its dead letters, a stream <record>:dead
-- ARGV[1..] dead-letter ids to move, or none: every dead letter (at most 1000 per call)
--
-- Each message goes back with its body, idempotency key and checksum, under a new inbox id, and
-- inbox.seq counts it, so its holder (if any) pulls it; its refusal count starts over (it
-- was dropped when the message was dead-lettered).
-- MaxInbox does not apply: the operator chose to put these back.
--
-- Answers: {moved, holderJob|'', holderToken|''}
--          {'CORRUPT', field, why}  a key is not what this library writes; nothing moved
local rec, inbox, dead = KEYS[1], KEYS[2], KEYS[3]
local f = redis.pcall('HMGET', rec, 'lock.job', 'lock.token')
if f.err then
  return {'CORRUPT', '(record)', 'the record key is not a hash'}
end
for _, k in ipairs({{inbox, 'inbox'}, {dead, 'dead'}}) do
  local ty = redis.call('TYPE', k[1])['ok']
  if ty ~= 'stream' and ty ~= 'none' then
    return {'CORRUPT', k[2], 'not a stream'}
  end
end
local entries = {}
if #ARGV == 0 then
  entries = redis.call('XRANGE', dead, '-', '+', 'COUNT', 1000)
else
  for _, id in ipairs(ARGV) do
    for _, e in ipairs(redis.call('XRANGE', dead, id, id)) do
      entries[#entries + 1] = e
    end
  end
end
local moved = 0
for _, e in ipairs(entries) do
  local add = {'XADD', inbox, '*'}
  for i = 1, #e[2], 2 do
    if e[2][i] == 'b' or e[2][i] == 'k' or e[2][i] == 'c' then
      add[#add + 1] = e[2][i]
      add[#add + 1] = e[2][i + 1]
    end
  end
  if #add == 3 then
    add[4], add[5] = 'b', ''
  end
  redis.call(unpack(add))
  redis.call('XDEL', dead, e[1])
  moved = moved + 1
end
if moved > 0 then
  redis.call('HINCRBY', rec, 'inbox.seq', moved)
end
return {moved, f[1] or '', f[2] or ''}
