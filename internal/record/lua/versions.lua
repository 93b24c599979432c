-- versions.lua: list the kept versions of a record (read only).
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its history hash <record>:hist (see history.go)
-- ARGV[1]  '1': also answer the values of every field of the newest kept version (the
--          version a write that keeps a new one rewrites as a delta); else '0'. The
--          record's data, which that write keeps, is read apart (a plain HGET): a string of
--          megabytes passed through Lua holds Redis twenty times as long.
--
-- Answers: {ver|false, at|false, hasData ('1'|'0'), histAt|false, 'fields', {name1, head1, size1, ...},
--           {name1, value1, ...}, sum|false}
-- the current version, its write time (ms, Redis TIME), whether it has data and when the
-- record last kept a version; then every field of the history, each with its value when it
-- holds a version's metadata (k<ver>, f<ver>, t<ver>, and v<ver> when at most 2048 bytes
-- long; else false) and, for the fields of the earlier layouts (f, v, d, t), its length
-- (HSTRLEN; -1 for the k fields, whose header says it); then, with ARGV[1] = '1', the
-- fields of the newest version with their values; then the record's checksum (its ver and
-- at copies check the current version's).
--
-- A history kept as a listpack (a small profile's: every value at most
-- hash-max-listpack-value, 64 bytes by default, and at most hash-max-listpack-entries) is
-- answered whole, {..., 'all', {name1, value1, ...}, {}, sum}: one HGETALL, smaller than the
-- calls that would pick from it, and the caller sorts it out.
--
-- Cost: otherwise one HKEYS, and for each version one HSTRLEN and one HGET of at most 2048
-- bytes (a k version's first field is at most 64): what the listing reads grows with the
-- versions kept, never with their data. The newest version's values are one version's bytes.
local f = redis.call('HMGET', KEYS[1], 'ver', 'at', 'hist.at', 'sum')
local hasData = redis.call('HSTRLEN', KEYS[1], 'data') > 0 and '1' or '0'
local enc = redis.pcall('OBJECT', 'ENCODING', KEYS[2]) -- an error (a Redis without it): field by field
if enc == 'listpack' or enc == 'ziplist' then
  return {f[1] or false, f[2] or false, hasData, f[3] or false, 'all', redis.call('HGETALL', KEYS[2]), {}, f[4] or false}
end
local fields = {}
local newest, newestFields = -1, {}
for _, name in ipairs(redis.call('HKEYS', KEYS[2])) do
  local c = string.sub(name, 1, 1)
  local digits = string.match(name, '^[kfvdt](%d+)')
  if digits then
    local chunked = string.find(name, '.', 1, true) ~= nil
    local head, size = false, -1
    if c ~= 'k' then
      size = redis.call('HSTRLEN', KEYS[2], name)
    end
    if not chunked and c ~= 'd' then
      local n = size
      if c == 'k' then
        n = redis.call('HSTRLEN', KEYS[2], name)
      end
      if n <= 2048 then
        head = redis.call('HGET', KEYS[2], name)
      end
    end
    fields[#fields + 1] = name
    fields[#fields + 1] = head
    fields[#fields + 1] = size
    local v = tonumber(digits)
    if v > newest then
      newest, newestFields = v, {name}
    elseif v == newest then
      newestFields[#newestFields + 1] = name
    end
  end
end
local values = {}
if ARGV[1] == '1' and #newestFields > 0 then
  local vals = redis.call('HMGET', KEYS[2], unpack(newestFields))
  for i, name in ipairs(newestFields) do
    values[#values + 1] = name
    values[#values + 1] = vals[i]
  end
end
return {f[1] or false, f[2] or false, hasData, f[3] or false, 'fields', fields, values, f[4] or false}
