-- repair.lua: put right what another tool broke in a profile's record, so that it loads
-- and saves again (the operator's `playerdata repair`). Nothing stored is deleted.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox (a stream), KEYS[3] its history (a hash), KEYS[4] its refusal counts
--          (a hash), KEYS[5] its dead letters (a stream): the keys beside it
-- ARGV[1]  '1' to change things, '0' to only say what would change (a dry run)
-- ARGV[2]  '1' (force, a human decided) to start a record that is missing while keys
--          beside it remain over (its next join gets Defaults, its history and inbox
--          stay), else '0'
-- ARGV[3]  the suffix a key of the wrong type is renamed aside with (':corrupt:<ms>')
-- ARGV[4]  the record format this build writes
-- ARGV[5]  LockSkew in ms: a lock without the presence flag stamped further ahead of the
--          Redis clock is broken
-- ARGV[6]  the lock token whose broken lock.presence may be set to '1' ('' for none): the
--          caller read the holder's presence (alive, or a missing beat that proves nothing
--          yet, or stopped) and judged the flag safe (internal/lockrule)
--
-- What it does, field by field:
--   (record) missing, or never acquired (a Send made it again with inbox.seq alone), while its
--           history or an uncounted inbox remains: started over with force only, with an
--           epoch of the Redis time in ms, a ver above every kept version, and an inbox.seq
--           that counts the messages waiting (so its next join reads them);
--   a key of the wrong type (the record, its inbox, history, refusal counts or dead
--        letters) is renamed aside (<key><ARGV[3]>), never deleted;
--   epoch   not an integer: Redis time in ms, above any epoch a record reaches one
--           acquisition at a time, so the fencing token never goes back;
--   ver     not an integer: the ver the record's checksum (sum) copies, else one more than
--           the newest kept version and released.ver (the compare-and-set base, and the
--           names of kept versions);
--   inbox.seq not an integer: the number of messages in the inbox and the dead letters (it
--           only tells a holder to pull, and only needs to grow);
--   at      not an integer: the at the record's checksum copies, else removed;
--   hist.at, released.ver not an integer: removed (the next write sets them);
--   lock.seq not '<epoch>,<n>': removed (the holder's next write sets it; until then no write
--           of the session is refused as late);
--   lock.at  not an integer, or (without the presence flag) ahead of the Redis clock by
--           more than ARGV[5]: set to the Redis time in ms, the lock kept with its holder
--           and token (a later stamp only ever delays a takeover by age; the holder's next
--           save stamps it again);
--   lock.presence neither '1' nor '0': set to '1', the lock kept, when the lock still
--           carries the token ARGV[6] names; else left;
--   lock.job empty under a token: left (the lock names no holder; whether any live server
--           can hold its token is the caller's to judge, and free.lua frees it). No lock
--           changes hands here: repair never frees one;
--   fmt, schema, schema.min broken: left alone (only the build that wrote the data knows
--           them): answered as left; so are a ver or at that disagree with the checksum
--           (which is damaged, the field or its copy, is not known: a restore of a kept
--           version writes both again).
--
-- Answers: {{field, what}, ...} changed (or, in a dry run, to be changed), then
--          {{field, why}, ...} left alone.
local rec = KEYS[1]
local apply, force, aside = ARGV[1] == '1', ARGV[2] == '1', ARGV[3]
local changed, left = {}, {}
local function change(field, what)
  changed[#changed + 1] = {field, what}
end
local function leave(field, why)
  left[#left + 1] = {field, why}
end
local function isint(v)
  return v and string.match(v, '^%d+$') ~= nil and #v <= 15
end

local names = {[1] = '(record)', [2] = 'inbox', [3] = 'history', [4] = 'tries', [5] = 'dead'}
local want = {[1] = 'hash', [2] = 'stream', [3] = 'hash', [4] = 'hash', [5] = 'stream'}
for i = 1, 5 do
  local ty = redis.call('TYPE', KEYS[i])['ok']
  if ty ~= 'none' and ty ~= want[i] then
    change(names[i], 'renamed aside to ' .. KEYS[i] .. aside .. ' (it was a ' .. ty .. ')')
    if apply then
      redis.call('RENAME', KEYS[i], KEYS[i] .. aside)
    end
  end
end

local exists = redis.call('EXISTS', rec) == 1 and redis.call('TYPE', rec)['ok'] == 'hash'
local t = redis.call('TIME')
local nowMS = t[1] .. string.sub(string.rep('0', 6 - #t[2]) .. t[2], 1, 3)

-- One more than the newest kept version (and than released.ver, v): the next version the
-- record writes names no kept one.
local function nextVer(v)
  local top = tonumber(v or '') or 0
  if redis.call('TYPE', KEYS[3])['ok'] == 'hash' then
    for _, name in ipairs(redis.call('HKEYS', KEYS[3])) do
      local n = tonumber(string.match(name, '^[dtfvk](%d+)') or '')
      if n and n > top then
        top = n
      end
    end
  end
  return tostring(top + 1)
end
-- The messages in the inbox and the dead letters: an inbox.seq that counts at least them
-- makes a holder read its inbox.
local function messages()
  local n = 0
  for i = 2, 5, 3 do
    if redis.call('TYPE', KEYS[i])['ok'] == 'stream' then
      n = n + redis.call('XLEN', KEYS[i])
    end
  end
  return n
end

-- A record missing, or never acquired (a Send made it again with inbox.seq alone), while
-- its history, or an inbox inbox.seq does not count, remains: what is left of a deleted
-- one. Started over, with force: a new epoch above any it had, a ver above every kept
-- version, an inbox.seq that counts the messages waiting.
local g = exists and redis.call('HMGET', rec, 'epoch', 'data', 'inbox.seq') or {}
if not g[1] and not g[2] then
  local seq = tonumber(g[3] or '')
  if redis.call('EXISTS', KEYS[3]) > 0 or (not seq and redis.call('EXISTS', KEYS[2]) > 0) then
    if force then
      change('(record)', 'started over (its next join gets Defaults; its history and inbox stay)')
      if apply then
        redis.call('HSET', rec, 'fmt', ARGV[4], 'epoch', nowMS, 'ver', nextVer(nil),
          'inbox.seq', tostring(math.max(seq or 0, messages())))
      end
    else
      leave('(record)', 'missing while its inbox or history remains: --force starts it over from Defaults')
    end
  end
  return {changed, left}
end

local f = redis.call('HMGET', rec, 'epoch', 'ver', 'inbox.seq', 'at', 'hist.at', 'released.ver', 'lock.token',
  'lock.job', 'lock.at', 'lock.presence', 'fmt', 'schema', 'schema.min', 'sum', 'lock.seq')
local sumVer, sumAt = string.match(f[14] or '', '^(%d+),(%d*),%x+$')
local set, del = {}, {}
if f[1] and not isint(f[1]) then
  change('epoch', 'set to ' .. nowMS .. ' (the Redis time in ms: the epoch never goes back)')
  set[#set + 1], set[#set + 2] = 'epoch', nowMS
end
if f[2] and not isint(f[2]) then
  local v = sumVer or nextVer(f[6])
  change('ver', 'set to ' .. v .. (sumVer and ' (as the record\'s checksum copies it)' or ''))
  set[#set + 1], set[#set + 2] = 'ver', v
elseif sumVer and f[2] ~= sumVer then
  leave('ver', 'disagrees with the record\'s checksum: restore a kept version (playerdata restore)')
end
if f[4] and not isint(f[4]) and sumAt and sumAt ~= '' then
  change('at', 'set to ' .. sumAt .. ' (as the record\'s checksum copies it)')
  set[#set + 1], set[#set + 2] = 'at', sumAt
  f[4] = sumAt
elseif sumAt and isint(f[4]) and f[4] ~= sumAt then
  leave('at', 'disagrees with the record\'s checksum: restore a kept version (playerdata restore)')
end
if f[3] and not isint(f[3]) then
  local n = messages()
  change('inbox.seq', 'set to ' .. n)
  set[#set + 1], set[#set + 2] = 'inbox.seq', tostring(n)
end
for i, name in pairs({[4] = 'at', [5] = 'hist.at', [6] = 'released.ver', [15] = 'lock.seq'}) do
  local bad = f[i] and not isint(f[i])
  if i == 15 then
    bad = f[i] and (#f[i] > 31 or not string.find(f[i], '^%d+,%d+$'))
  end
  if bad then
    change(name, 'removed (the next write sets it)')
    del[#del + 1] = name
  end
end
local token = f[7]
if token and token ~= '' then
  if not isint(f[9]) or (tonumber(f[9]) > tonumber(nowMS) + tonumber(ARGV[5]) and f[10] ~= '1') then
    change('lock.at', 'set to ' .. nowMS .. ' (the Redis time in ms; the holder keeps its lock and token, and its '
      .. 'next save stamps it again)')
    set[#set + 1], set[#set + 2] = 'lock.at', nowMS
  end
  if f[10] and f[10] ~= '1' and f[10] ~= '0' then
    if ARGV[6] ~= '' and ARGV[6] == token then
      change('lock.presence', 'set to 1 (the holder keeps its lock and token; the lock moves only once its holder '
        .. 'releases it or is proven stopped)')
      set[#set + 1], set[#set + 2] = 'lock.presence', '1'
    else
      leave('lock.presence', 'neither 1 nor 0, and its holder\'s presence was not judged')
    end
  end
  if not f[8] or f[8] == '' then
    leave('lock.job', 'a lock that names no holder')
  end
end
for i, name in pairs({[11] = 'fmt', [12] = 'schema', [13] = 'schema.min'}) do
  if f[i] and not isint(f[i]) then
    leave(name, 'only the build that wrote the data knows it: set it by hand')
  end
end
if apply and #set > 0 then
  redis.call('HSET', rec, unpack(set))
end
if apply and #del > 0 then
  redis.call('HDEL', rec, unpack(del))
end
return {changed, left}
