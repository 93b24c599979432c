-- versions.lua: list the kept versions of a record (read only).
--
-- KEYS[1]  the record hash   <ns>:{<driver>:<key>}
-- KEYS[2]  the history hash  <ns>:{<driver>:<key>}:h
--
-- Answers: {ver|false, at|false, histFields...}: the current version and its write time
-- (ms, Redis TIME), then the history hash's fields and values flattened
-- (d:<ver> entries are skipped: only t:<ver> fields are returned, with their times).
local cur = redis.call('HMGET', KEYS[1], 'ver', 'at', 'data')
local out = {cur[1] or false, cur[2] or false, cur[3] and '1' or '0'}
local h = redis.call('HGETALL', KEYS[2])
for i = 1, #h, 2 do
  if string.sub(h[i], 1, 2) == 't:' then
    out[#out + 1] = string.sub(h[i], 3)
    out[#out + 1] = h[i + 1]
  end
end
return out
