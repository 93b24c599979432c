-- versions.lua: list the kept versions of a record (read only).
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>} (ring slots h<s>.v, h<s>.t; see save.lua)
-- ARGV[1]  history: the number of ring slots
--
-- Answers: {ver|false, at|false, hasData ('1'|'0'), v0|false, t0|false, v1|false, t1|false, ...}:
-- the current version, its write time (ms, Redis TIME) and whether it has data, then each
-- ring slot's version and write time.
local fields = {'ver', 'at'}
for s = 0, tonumber(ARGV[1]) - 1 do
  fields[#fields + 1] = 'h' .. s .. '.v'
  fields[#fields + 1] = 'h' .. s .. '.t'
end
local f = redis.call('HMGET', KEYS[1], unpack(fields))
local out = {f[1] or false, f[2] or false, redis.call('HSTRLEN', KEYS[1], 'data') > 0 and '1' or '0'}
for i = 3, #f do
  out[#out + 1] = f[i] or false
end
return out
