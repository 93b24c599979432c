-- versions.lua: list the kept versions of a record (read only).
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its history hash <record>:hist (t<ver> = "<at>,<schema>,<schemaMin>")
--
-- Records written before the history hash kept versions in the record itself, as ring
-- slots h<s>.v (version), h<s>.t (write time) and h<s>.d (data); they are listed too.
--
-- Answers: {ver|false, at|false, hasData ('1'|'0'), {ver1, meta1, ver2, meta2, ...},
--           {slot1, slotVer1, slotAt1, slot2, ...}}
-- the current version, its write time (ms, Redis TIME) and whether it has data; then each
-- version of the history hash with its "<at>,<schema>,<schemaMin>"; then each ring slot.
local f = redis.call('HMGET', KEYS[1], 'ver', 'at')
local hist = {}
local names = redis.call('HKEYS', KEYS[2])
for _, name in ipairs(names) do
  if string.sub(name, 1, 1) == 't' then
    hist[#hist + 1] = string.sub(name, 2)
    hist[#hist + 1] = redis.call('HGET', KEYS[2], name)
  end
end
local slots = {}
for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
  local s = string.match(name, '^h(%d+)%.v$')
  if s then
    local v = redis.call('HMGET', KEYS[1], name, 'h' .. s .. '.t')
    slots[#slots + 1] = s
    slots[#slots + 1] = v[1]
    slots[#slots + 1] = v[2] or '0'
  end
end
return {f[1] or false, f[2] or false, redis.call('HSTRLEN', KEYS[1], 'data') > 0 and '1' or '0', hist, slots}
