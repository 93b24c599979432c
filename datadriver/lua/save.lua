-- save.lua: write a profile under its lock (save), or write it and clear the lock
-- (release). Fenced: nothing is written unless the lock is the profile's.
--
-- KEYS[1]  the record hash   <ns>:{<driver>:<key>}
-- KEYS[2]  the history hash  <ns>:{<driver>:<key>}:h   (fields d:<ver> data, t:<ver> ms)
-- ARGV[1]  mode: 'save' or 'release'
-- ARGV[2]  lock token of the profile
-- ARGV[3]  earlier tokens of the same profile, space separated, or '' (set after an
--          adoption whose save has not landed yet). The lock is the profile's when it
--          names ARGV[2] or one of these, or when it is free and its last release was
--          under one of them with nobody writing since (released.ver == ver: a release
--          whose answer was lost). A write that finds it so moves the lock to ARGV[2]
--          and increments epoch (a new session), or, in 'release' mode on a lock already
--          released that way, answers 'already-released' without writing.
-- ARGV[4]  job id (written when the lock moves to ARGV[2])
-- ARGV[5]  presence flag '1'/'0' (written when the lock moves to ARGV[2])
-- ARGV[6]  '1' when ARGV[7] carries new data, '0' to keep the stored data
-- ARGV[7]  data (opaque msgpack)
-- ARGV[8]  '1' when ARGV[9], ARGV[10] carry new user ids and metadata
-- ARGV[9]  user ids (opaque msgpack)
-- ARGV[10] metadata (opaque msgpack)
-- ARGV[11] history size: how many past versions to keep
-- ARGV[12] trade id this write settles, or '' (a record with another pending trade refuses)
--
-- Every accepted call refreshes lock.at from Redis TIME. A data write moves the old data
-- to history as version ver, drops version ver-history, and increments ver.
--
-- Answers:
--   {'OK', ver, epoch, moved ('1'|'0'), how ('saved'|'released'|'already-released')}
--   {'LOST', job|'', token|''}   the lock is not the profile's; nothing written
--   {'TRADE', tradeId}          another trade is pending on the record; nothing written
local rec, hist = KEYS[1], KEYS[2]
local mode, tok, earlier = ARGV[1], ARGV[2], ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local f = redis.call('HMGET', rec, 'lock.token', 'lock.job', 'released', 'released.ver', 'ver', 'trade', 'epoch')
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
  local ownRelease = free and (released == tok or earlierToken(released)) and tonumber(relver) == ver
  if ownRelease and mode == 'release' then
    return {'OK', ver, epoch or '0', '0', 'already-released'}
  end
  if not (ownRelease or earlierToken(token)) then
    return {'LOST', job or '', token or ''}
  end
  moved = '1'
end

if trade and trade ~= '' and trade ~= ARGV[12] then
  return {'TRADE', trade}
end

if ARGV[6] == '1' then
  local keep = tonumber(ARGV[11])
  if keep > 0 then
    local old = redis.call('HMGET', rec, 'data', 'at')
    if old[1] then
      redis.call('HSET', hist, 'd:' .. ver, old[1], 't:' .. ver, old[2] or '0')
    end
    if ver - keep >= 0 then
      redis.call('HDEL', hist, 'd:' .. (ver - keep), 't:' .. (ver - keep))
    end
  end
  ver = ver + 1
  redis.call('HSET', rec, 'data', ARGV[7], 'ver', ver, 'at', now)
end
if ARGV[8] == '1' then
  redis.call('HSET', rec, 'uids', ARGV[9], 'meta', ARGV[10])
end
if ARGV[12] ~= '' and trade == ARGV[12] then
  redis.call('HDEL', rec, 'trade')
end
if moved == '1' then
  epoch = redis.call('HINCRBY', rec, 'epoch', 1)
end

if mode == 'release' then
  redis.call('HSET', rec, 'released', tok, 'released.ver', ver,
    'lock.token', '', 'lock.job', '', 'lock.at', now)
  return {'OK', ver, epoch or '0', moved, 'released'}
end
redis.call('HSET', rec, 'lock.token', tok, 'lock.job', ARGV[4], 'lock.presence', ARGV[5], 'lock.at', now)
return {'OK', ver, epoch or '0', moved, 'saved'}
