-- acquire.lua: take a profile's session lock, or say who holds it. This script is the one
-- place where the rule of who may take a lock lives.
--
-- KEYS[1]  the record hash  <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox, a stream <record>:inbox (same slot), read when the lock is taken;
--          given only when ARGV[7] > 0
-- ARGV[1]  job id of the caller
-- ARGV[2]  new lock token (random, unique per acquisition)
-- ARGV[3]  presence flag to write: '1' when the caller beats presence, else '0'
-- ARGV[4]  max age in ms (LockTTL + LockSkew) after which a lock is stale by age
-- ARGV[5]  highest record format this build reads
-- ARGV[6]  the caller's schema version: a record whose schema.min is higher must not be
--          read by it
-- ARGV[7]  at most how many inbox messages to return with the record
-- ARGV[8]  steal job: a holder the caller proved stopped, or the caller's own job id for
--          a lock an earlier run of the same JobID left, or ''
-- ARGV[9]  steal token: the token of that holder's lock the caller saw and found older
--          than the proof (a session of a server that stopped: it fenced itself before its
--          presence expired, so that token is dead), or of the earlier run's lock
-- ARGV[10] not-alive token: the token of a lock whose holder's presence the caller read as
--          stopped or unknown (lets a stale presence-flagged lock go by age), or ''
--          ARGV[8] to ARGV[10] are given only when one of them is not empty.
--
-- The lock is taken when it is free ('free', or 'new' without a record); when ARGV[8] and
-- ARGV[9] name its holder and token, and it carries presence=1 ('stolen': the caller
-- proved the holder stopped after this lock was written) or the holder is the caller's
-- own JobID ('own': an earlier run of it left the lock); or when it is older than ARGV[4]
-- and either carries no presence flag or ARGV[10] names its token ('expired'). A token
-- match takes exactly the lock the caller judged, never one written since. A LOCKED
-- answer says whether the lock is stale: past ARGV[4] with the presence flag, so that it
-- goes by age once its holder reads not alive. Timestamps come from Redis TIME. epoch is
-- incremented on every acquisition. Three Redis calls: TIME, HMGET, HSET (and XRANGE
-- when messages wait).
--
-- Cost: a call's Redis time grows with every argument, field and number turned into a
-- string, so the common call carries 7 arguments, numbers the script writes are built as
-- strings, and the stored values go back as they were read.
--
-- Answers:
--   {'OK', how, epoch, ver, data|false, at|false, trade|false, uids|false, meta|false, prevJob|false,
--    schema|false, schemaMin|false, histAt|false, inboxSeq|false, now[, {id1, body1, id2, body2, ...}]}
--       how: 'new', 'free', 'stolen', 'own' or 'expired'; histAt: when the last version was
--       kept (ms); inboxSeq: how many messages were ever sent; now: Redis time (ms); then,
--       when messages wait (inboxSeq > 0 and ARGV[7] > 0), the oldest inbox messages
--   {'LOCKED', job, token, presence ('1'|'0'), ageMs, stale (1|0)}
--   {'FORMAT', fmt}        the record has a format newer than ARGV[5]; nothing was changed
--   {'SCHEMA', schemaMin}  the record may not be read below schema version schemaMin, higher
--                          than ARGV[6]; nothing was changed (checked before the lock, so
--                          an older server refuses at once whoever holds it)
local rec = KEYS[1]
local t = redis.call('TIME')
local f = redis.call('HMGET', rec, 'fmt', 'lock.token', 'lock.job', 'lock.at', 'lock.presence', 'epoch',
  'ver', 'data', 'at', 'trade', 'uids', 'meta', 'schema', 'schema.min', 'hist.at', 'inbox.seq')
local fmt, token, job, presence, epoch = f[1], f[2], f[3], f[5], f[6]
if fmt and fmt ~= ARGV[5] and (tonumber(fmt) or 0) > tonumber(ARGV[5]) then
  return {'FORMAT', fmt}
end
if f[14] and f[14] ~= ARGV[6] and (tonumber(f[14]) or 0) > tonumber(ARGV[6]) then
  return {'SCHEMA', f[14]}
end

local how
if not epoch and not f[8] then -- never acquired (a record Send made holds only inbox.seq)
  how = 'new'
elseif not token or token == '' then
  how = 'free'
else
  local age = t[1] * 1000 + math.floor(t[2] / 1000) - (tonumber(f[4]) or 0)
  local stale = age > tonumber(ARGV[4])
  local stealJob, notAlive = ARGV[8] or '', ARGV[10] or ''
  if stealJob ~= '' and stealJob == job and ARGV[9] == token and (presence == '1' or job == ARGV[1]) then
    how = (job == ARGV[1]) and 'own' or 'stolen'
  elseif stale and (presence ~= '1' or (notAlive ~= '' and notAlive == token)) then
    how = 'expired'
  else
    return {'LOCKED', job or '', token, presence or '0', age, stale and 1 or 0}
  end
end

-- now in ms as a string, without formatting a number: seconds, then the first three
-- of the six microsecond digits (zero-padded)
local now = t[1] .. string.sub(string.rep('0', 6 - #t[2]) .. t[2], 1, 3)

epoch = (tonumber(epoch) or 0) + 1
if how == 'new' then
  redis.call('HSET', rec, 'epoch', epoch, 'lock.job', ARGV[1], 'lock.token', ARGV[2], 'lock.at', now,
    'lock.presence', ARGV[3], 'ver', '0', 'fmt', ARGV[5])
else
  redis.call('HSET', rec, 'epoch', epoch, 'lock.job', ARGV[1], 'lock.token', ARGV[2], 'lock.at', now,
    'lock.presence', ARGV[3])
end
local seq = f[16]
if seq and seq ~= '0' and ARGV[7] ~= '0' then
  local inbox = {}
  for _, e in ipairs(redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', ARGV[7])) do
    local body = ''
    for i = 1, #e[2], 2 do
      if e[2][i] == 'b' then
        body = e[2][i + 1]
      end
    end
    inbox[#inbox + 1] = e[1]
    inbox[#inbox + 1] = body
  end
  return {'OK', how, epoch, f[7] or '0', f[8], f[9], f[10], f[11], f[12], job or false, f[13], f[14], f[15],
    seq, now, inbox}
end
return {'OK', how, epoch, f[7] or '0', f[8], f[9], f[10], f[11], f[12], job or false, f[13], f[14], f[15], seq or false,
  now}
