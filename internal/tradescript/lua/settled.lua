-- settled.lua: mark participants of a committed trade as settled (their image is in
-- their record), and let the entry expire once every participant is.
--
-- KEYS[1]  the journal hash <ns>:trade:{<id>}
-- ARGV[1]  retention in ms after the last mark
-- ARGV[2..] participant indices (0-based) now settled
--
-- Answers: {'OK', remaining} (participants not yet settled) | {'STATE', state} (not COMMITTED)
local j = KEYS[1]
local f = redis.call('HMGET', j, 'state', 'n')
if f[1] ~= 'COMMITTED' then
  return {'STATE', f[1] or ''}
end
local set = {}
for i = 2, #ARGV do
  set[#set + 1] = 's' .. ARGV[i]
  set[#set + 1] = '1'
end
if #set > 0 then
  redis.call('HSET', j, unpack(set))
end
local remaining = 0
for i = 0, tonumber(f[2]) - 1 do
  if redis.call('HEXISTS', j, 's' .. i) == 0 then
    remaining = remaining + 1
  end
end
if remaining == 0 then
  redis.call('PEXPIRE', j, ARGV[1])
end
return {'OK', remaining}
