-- save.lua: write a profile under its lock (save), or write it and clear the lock
-- (release). Fenced: nothing is written unless the lock is the profile's.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox, a stream <record>:inbox (same slot)
-- KEYS[3]  its history, a hash <record>:hist (same slot): d<ver> = a kept version's data
--          (compressed by the caller), t<ver> = "<at>,<schema>,<schemaMin>"
-- ARGV[1]  mode: 'save', 'release', or 'settle' (a save that lands only while the
--          record is marked with trade ARGV[9]: a trade's idempotent image write)
-- ARGV[2]  lock token of the profile
-- ARGV[3]  job id (written when the lock moves to ARGV[2])
-- ARGV[4]  presence flag '1'/'0' (written when the lock moves to ARGV[2])
-- ARGV[5]  new data (opaque), or '' to keep the stored data (see ARGV[6])
-- ARGV[6]  '1' when ARGV[5] carries new data
-- ARGV[7]  '1' when ARGV[8], ARGV[9] carry new user ids and metadata
-- ARGV[8]  user ids (opaque), ARGV[9] metadata (opaque)
-- ARGV[10] trade id this write settles (the mark is cleared), or ''. While the record is
--          marked with another trade every write is refused, but a bare release (no
--          data), which gives the lock back and leaves the mark for the next loader
-- ARGV[11] schema version of the new data, ARGV[12] the lowest that may read it
-- ARGV[13] history: how many versions to keep (0: none)
-- ARGV[14] history interval (ms): the first data write at least this long after the last
--          kept version keeps the data it replaces
-- ARGV[15] the data this write replaces, compressed by the caller, or '' (the caller
--          sends it when it reckons a version is due)
-- ARGV[16] the record version ARGV[15] is (kept only if it is the stored ver)
-- ARGV[17] '1' to keep ARGV[15] whatever the interval (the data before a restore)
-- ARGV[18] n: how many earlier tokens follow
-- ARGV[19 .. 18+n]  earlier tokens of the same profile (set after an adoption whose save
--          has not landed). The lock is the profile's when it names ARGV[2] or one of
--          these, or when it is free and its last release was under one of these with
--          nobody writing since (released.ver == ver: a release whose answer was lost,
--          then an adoption). A write that finds it so moves the lock to ARGV[2] and
--          increments epoch (a new session). A release that finds its own release (under
--          ARGV[2] or an earlier token) already landed answers 'already-released' without
--          writing, unless it carries newer data, which it writes (the player went on
--          after an adoption); a save under the very token that was released is late and
--          refused (LOST).
-- ARGV[19+n ..]  ids of inbox messages the new data has applied: deleted from the inbox
--          by this same write, so a message is applied exactly once
--
-- Every accepted call refreshes lock.at from Redis TIME. A data write increments ver.
-- Three Redis calls in the common case: TIME, HMGET, HSET (plus XDEL for applied
-- messages, HDEL of trade on a settle, and the history writes when a version is kept).
--
-- Answers:
--   {'OK', ver, epoch, moved ('1'|'0'), how, histAt, inboxSeq}  how: 'saved', 'released',
--       'already-released' or 'already-settled' (settle mode, the record no longer
--       carries the trade); histAt: when the last version was kept (ms, 0: never);
--       inboxSeq: how many messages were ever sent to the profile
--   {'LOST', job|'', token|''}   the lock is not the profile's; nothing written
--   {'TRADE', tradeId}          another trade is pending on the record; nothing written
local rec = KEYS[1]
local mode, tok = ARGV[1], ARGV[2]
local hasData = ARGV[6] == '1'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local f = redis.call('HMGET', rec, 'lock.token', 'lock.job', 'released', 'released.ver', 'ver', 'trade', 'epoch',
  'hist.at', 'inbox.seq')
local token, job, released, relver, ver, trade, epoch = f[1], f[2], f[3], f[4], f[5], f[6], f[7]
ver = tonumber(ver) or 0
local histAt = tonumber(f[8]) or 0
local nEarlier = tonumber(ARGV[18])

local function earlierToken(x)
  if not x or x == '' then
    return false
  end
  for i = 19, 18 + nEarlier do
    if ARGV[i] == x then
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
  if ownRelease and mode == 'release' and not hasData and ARGV[7] ~= '1' then
    -- the retried release has nothing newer to write: the landed one stands
    return {'OK', ver, epoch or '0', '0', 'already-released', histAt, f[9] or '0'}
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

if mode == 'settle' and trade ~= ARGV[10] then
  return {'OK', ver, epoch or '0', '0', 'already-settled', histAt, f[9] or '0'}
end
if trade and trade ~= '' and trade ~= ARGV[10] and (hasData or mode ~= 'release') then
  return {'TRADE', trade}
end

local set = {} -- field/value pairs written to the record in one HSET
local function put(k, v)
  set[#set + 1] = k
  set[#set + 1] = v
end
if hasData then
  local keep = tonumber(ARGV[13])
  if keep > 0 and ARGV[15] ~= '' and tonumber(ARGV[16]) == ver and
      (ARGV[17] == '1' or now - histAt >= tonumber(ARGV[14])) then
    -- Keep the data this write replaces as a version, then trim to the newest
    -- `keep` (rare: at most once an interval, and before a restore).
    local old = redis.call('HMGET', rec, 'at', 'schema', 'schema.min')
    redis.call('HSET', KEYS[3], 'd' .. ver, ARGV[15],
      't' .. ver, (old[1] or '0') .. ',' .. (old[2] or '0') .. ',' .. (old[3] or '0'))
    histAt = now
    put('hist.at', now)
    local names = redis.call('HKEYS', KEYS[3])
    local vers = {}
    for _, name in ipairs(names) do
      if string.sub(name, 1, 1) == 't' then
        vers[#vers + 1] = tonumber(string.sub(name, 2))
      end
    end
    if #vers > keep then
      table.sort(vers)
      for i = 1, #vers - keep do
        redis.call('HDEL', KEYS[3], 'd' .. vers[i], 't' .. vers[i])
      end
    end
  end
  ver = ver + 1
  put('data', ARGV[5]); put('ver', ver); put('at', now); put('schema', ARGV[11]); put('schema.min', ARGV[12])
end
if ARGV[7] == '1' then
  put('uids', ARGV[8]); put('meta', ARGV[9])
end
if ARGV[10] ~= '' and trade == ARGV[10] then
  redis.call('HDEL', rec, 'trade')
end
if moved == '1' then
  epoch = (tonumber(epoch) or 0) + 1
  put('epoch', epoch)
end
if #ARGV > 18 + nEarlier then
  redis.call('XDEL', KEYS[2], unpack(ARGV, 19 + nEarlier))
end

local how = 'saved'
if mode == 'release' then
  how = 'released'
  put('released', tok); put('released.ver', ver); put('lock.token', ''); put('lock.job', '')
elseif moved == '1' then
  put('lock.token', tok); put('lock.job', ARGV[3]); put('lock.presence', ARGV[4])
end
put('lock.at', now)
redis.call('HSET', rec, unpack(set))
return {'OK', ver, epoch or '0', moved, how, histAt, f[9] or '0'}
