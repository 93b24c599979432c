-- versions.lua: list the kept versions of a record (read only).
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its history hash <record>:hist (see history.go): f<ver> and t<ver> are a
--          version's metadata as text, v<ver> begins with a version's metadata
--
-- Answers: {ver|false, at|false, hasData ('1'|'0'), {name1, head1, name2, head2, ...}}
-- the current version, its write time (ms, Redis TIME) and whether it has data; then each
-- version's field that holds its metadata, with the metadata: an f<ver> or t<ver> whole,
-- the first 32 bytes of a v<ver> (chunks, named <field>.1 and on, are not listed).
local f = redis.call('HMGET', KEYS[1], 'ver', 'at')
local hist = {}
for _, name in ipairs(redis.call('HKEYS', KEYS[2])) do
  local c = string.sub(name, 1, 1)
  if (c == 't' or c == 'f' or c == 'v') and not string.find(name, '.', 1, true) then
    hist[#hist + 1] = name
    hist[#hist + 1] = string.sub(redis.call('HGET', KEYS[2], name), 1, 32)
  end
end
return {f[1] or false, f[2] or false, redis.call('HSTRLEN', KEYS[1], 'data') > 0 and '1' or '0', hist}
