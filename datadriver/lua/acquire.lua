-- acquire.lua: take a profile's session lock, or say who holds it.
--
-- KEYS[1]  the record hash  <ns>:{<driver>:<key>}
-- ARGV[1]  job id of the caller
-- ARGV[2]  new lock token (random, unique per acquisition)
-- ARGV[3]  presence flag to write: '1' when the caller beats presence, else '0'
-- ARGV[4]  max age in ms (LockTTL + LockSkew) after which an unprotected lock is stale
-- ARGV[5]  steal job: a holder the caller proved stopped (two empty presence reads), or
--          the caller's own job id for a lock an earlier run of the same JobID left, or ''
-- ARGV[6]  steal token: the lock token the caller saw on that holder
-- ARGV[7]  not-alive token: the token of a lock whose holder's presence the caller
--          read as stopped or unknown (lets a stale presence-flagged lock go by age), or ''
-- ARGV[8]  highest record format this build reads
--
-- The lock is taken when it is free; when ARGV[5]/ARGV[6] name the holder and its token
-- and the lock carries presence=1 ('stolen'), or the holder is the caller's own job id
-- ('own': no session of this run holds it); or when it is older than ARGV[4] and either
-- carries no presence flag or ARGV[7] names its token ('expired'). Timestamps come from
-- Redis TIME. epoch is incremented on every acquisition. Three Redis calls: TIME, HMGET,
-- HSET (the record is read whole in the HMGET, so a LOCKED answer also reads the data;
-- waiting joiners retry at most every ParkMin).
--
-- Answers:
--   {'OK', how, epoch, ver, data|false, at|false, trade|false, uids|false, meta|false, prevJob|false}
--       how: 'new' (no record), 'free', 'stolen', 'own' or 'expired'
--   {'LOCKED', job, token, presence ('1'|'0'), ageMs}
--   {'FORMAT', fmt}   the record has a format newer than ARGV[8]; nothing was changed
local rec = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local f = redis.call('HMGET', rec, 'fmt', 'lock.token', 'lock.job', 'lock.at', 'lock.presence', 'epoch',
  'ver', 'data', 'at', 'trade', 'uids', 'meta')
local fmt, token, job, at, presence, epoch = f[1], f[2], f[3], f[4], f[5], f[6]
if fmt and tonumber(fmt) and tonumber(fmt) > tonumber(ARGV[8]) then
  return {'FORMAT', fmt}
end

local how
if not epoch and redis.call('EXISTS', rec) == 0 then
  how = 'new'
elseif not token or token == '' then
  how = 'free'
else
  local age = now - (tonumber(at) or 0)
  if ARGV[5] ~= '' and ARGV[5] == job and ARGV[6] == token and (presence == '1' or job == ARGV[1]) then
    how = (job == ARGV[1]) and 'own' or 'stolen'
  elseif age > tonumber(ARGV[4]) and (presence ~= '1' or (ARGV[7] ~= '' and ARGV[7] == token)) then
    how = 'expired'
  else
    return {'LOCKED', job or '', token, presence or '0', tostring(age)}
  end
end

epoch = (tonumber(epoch) or 0) + 1
if how == 'new' then
  redis.call('HSET', rec, 'epoch', epoch, 'lock.job', ARGV[1], 'lock.token', ARGV[2], 'lock.at', now,
    'lock.presence', ARGV[3], 'ver', 0, 'fmt', ARGV[8])
else
  redis.call('HSET', rec, 'epoch', epoch, 'lock.job', ARGV[1], 'lock.token', ARGV[2], 'lock.at', now,
    'lock.presence', ARGV[3])
end
return {'OK', how, epoch, f[7] or '0', f[8], f[9], f[10], f[11], f[12], job or false}
