-- save.lua: write a profile under its lock (save), or write it and clear the lock
-- (release). Fenced: nothing is written unless the lock is the profile's.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}. Past versions live in it as ring
--          slots: slot s = ver % history holds h<s>.v (version), h<s>.t (write time,
--          ms) and h<s>.d (data).
-- ARGV[1]  mode: 'save', 'release', or 'settle' (a save that lands only while the
--          record is marked with trade ARGV[12]: a trade's idempotent image write)
-- ARGV[2]  lock token of the profile
-- ARGV[3]  earlier tokens of the same profile, space separated, or '' (set after an
--          adoption whose save has not landed yet). The lock is the profile's when it
--          names ARGV[2] or one of these, or when it is free and its last release was
--          under one of these with nobody writing since (released.ver == ver: a release
--          whose answer was lost, then an adoption). A write that finds it so moves the
--          lock to ARGV[2] and increments epoch (a new session). A release that finds
--          its own release (under ARGV[2] or an earlier token) already landed answers
--          'already-released' without writing, unless it carries newer data, which it
--          writes (the player went on after an adoption); a save under the very token
--          that was released is late and refused (LOST).
-- ARGV[4]  job id (written when the lock moves to ARGV[2])
-- ARGV[5]  presence flag '1'/'0' (written when the lock moves to ARGV[2])
-- ARGV[6]  '1' when ARGV[7] carries new data, '0' to keep the stored data
-- ARGV[7]  data (opaque msgpack)
-- ARGV[8]  '1' when ARGV[9], ARGV[10] carry new user ids and metadata
-- ARGV[9]  user ids (opaque msgpack)
-- ARGV[10] metadata (opaque msgpack)
-- ARGV[11] history: how many past versions to keep (ring slots)
-- ARGV[12] trade id this write settles (the mark is cleared), or ''. While the record is
--          marked with another trade every write is refused, but a bare release (no
--          data), which gives the lock back and leaves the mark for the next loader
-- ARGV[13] schema version the data was encoded at, ARGV[14] the lowest that may read it:
--          written with new data (schema, schema.min)
--
-- Every accepted call refreshes lock.at from Redis TIME. A data write moves the old data
-- into ring slot ver % history (overwriting the version history writes older) and
-- increments ver. Three Redis calls: TIME, HMGET, HSET (plus HDEL of trade on a settle).
--
-- Answers:
--   {'OK', ver, epoch, moved ('1'|'0'), how}  how: 'saved', 'released', 'already-released'
--       or 'already-settled' (settle mode, the record no longer carries the trade)
--   {'LOST', job|'', token|''}   the lock is not the profile's; nothing written
--   {'TRADE', tradeId}          another trade is pending on the record; nothing written
local rec = KEYS[1]
local mode, tok, earlier = ARGV[1], ARGV[2], ARGV[3]
local keep = tonumber(ARGV[11])
local withOld = ARGV[6] == '1' and keep > 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local f
if withOld then
  f = redis.call('HMGET', rec, 'lock.token', 'lock.job', 'released', 'released.ver', 'ver', 'trade', 'epoch', 'data', 'at')
else
  f = redis.call('HMGET', rec, 'lock.token', 'lock.job', 'released', 'released.ver', 'ver', 'trade', 'epoch')
end
local token, job, released, relver, ver, trade, epoch = f[1], f[2], f[3], f[4], f[5], f[6], f[7]
ver = tonumber(ver) or 0

local function earlierToken(x)
  if not x or x == '' or earlier == '' then
    return false
  end
  for e in string.gmatch(earlier, '%S+') do
    if e == x then
      return true
    end
  end
  return false
end

local moved = '0'
if token ~= tok then
  local free = (not token) or token == ''
  local relOK = free and tonumber(relver) == ver -- released, and nobody wrote since
  local ownRelease = relOK and (released == tok or earlierToken(released))
  if ownRelease and mode == 'release' and ARGV[6] ~= '1' and ARGV[8] ~= '1' then
    -- the retried release has nothing newer to write: the landed one stands
    return {'OK', ver, epoch or '0', '0', 'already-released'}
  end
  -- The lock may move to ARGV[2] when it still carries an earlier token (an
  -- adoption whose save has not landed), when the release that freed it was
  -- under an earlier token (an adoption of a release whose answer was lost), or
  -- for a release that carries newer data. A save under the very token that
  -- was released is late (it was in flight when the profile let go): refused.
  local allowed = earlierToken(token) or (relOK and earlierToken(released)) or (ownRelease and mode == 'release')
  if not allowed then
    return {'LOST', job or '', token or ''}
  end
  moved = '1'
end

if mode == 'settle' and trade ~= ARGV[12] then
  return {'OK', ver, epoch or '0', '0', 'already-settled'}
end
if trade and trade ~= '' and trade ~= ARGV[12] and (ARGV[6] == '1' or mode ~= 'release') then
  return {'TRADE', trade}
end

local set = {} -- field/value pairs written to the record in one HSET
local function put(k, v)
  set[#set + 1] = k
  set[#set + 1] = v
end
if ARGV[6] == '1' then
  if withOld and f[8] then
    local s = 'h' .. (ver % keep) .. '.'
    put(s .. 'v', ver); put(s .. 't', f[9] or '0'); put(s .. 'd', f[8])
  end
  ver = ver + 1
  put('data', ARGV[7]); put('ver', ver); put('at', now); put('schema', ARGV[13]); put('schema.min', ARGV[14])
end
if ARGV[8] == '1' then
  put('uids', ARGV[9]); put('meta', ARGV[10])
end
if ARGV[12] ~= '' and trade == ARGV[12] then
  redis.call('HDEL', rec, 'trade')
end
if moved == '1' then
  epoch = (tonumber(epoch) or 0) + 1
  put('epoch', epoch)
end

local how = 'saved'
if mode == 'release' then
  how = 'released'
  put('released', tok); put('released.ver', ver); put('lock.token', ''); put('lock.job', '')
elseif moved == '1' then
  put('lock.token', tok); put('lock.job', ARGV[4]); put('lock.presence', ARGV[5])
end
put('lock.at', now)
redis.call('HSET', rec, unpack(set))
return {'OK', ver, epoch or '0', moved, how}
