-- acquire.lua: take a profile's session lock, or say who holds it. This script is the one
-- place where the rule of who may take a lock lives.
--
-- KEYS[1]  the record hash  <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox, a stream <record>:inbox (same slot)
-- KEYS[3]  its history, a hash <record>:hist (same slot)
-- ARGV[1]  job id of the caller
-- ARGV[2]  new lock token (random, unique per acquisition)
-- ARGV[3]  presence flag to write: '1' when the caller beats presence, else '0'
-- ARGV[4]  max age in ms (LockTTL + LockSkew) after which a lock without the presence flag
--          is stale by age
-- ARGV[5]  skew in ms (LockSkew): a lock stamped further ahead of the Redis clock than this
--          is not a lock this library wrote
-- ARGV[6]  highest record format this build reads
-- ARGV[7]  the caller's schema version: a record whose schema.min is higher must not be
--          read by it
-- ARGV[8]  at most how many inbox messages to return with the record (0: none)
-- ARGV[9]  at most how many bytes of messages to return: the inbox is read ARGV[10]
--          messages at a time until this many bytes came back, so that a large inbox never
--          holds Redis for long (more than ARGV[9] by at most one read)
-- ARGV[10] messages per read
-- ARGV[11] steal job: a holder the caller proved stopped, or the caller's own job id for
--          a lock an earlier instance of the same JobID left (proven stopped by the
--          caller's presence claim), or '' (ARGV[11] and ARGV[12] only when stealing)
-- ARGV[12] steal token: the token of that holder's lock the caller saw and found older
--          than the proof
--
-- Every field the script computes with is checked before anything is written: an integer
-- field that is not a decimal integer, a schema or schema.min past 2147483647, a lock without a holder, a lock stamped ahead of the
-- Redis clock, an inbox that is not a stream or a history that is not a hash is answered
-- CORRUPT, naming the field, and nothing changes. The epoch is never lowered.
--
-- The lock is taken when it is free ('free', or 'new' without a record); when ARGV[11] and
-- ARGV[12] name its holder and token, and it carries presence=1 ('stolen': the caller
-- proved the holder stopped after this lock was written) or the holder is the caller's
-- own JobID ('own'); or when it carries no presence flag and is older than ARGV[4]
-- ('expired'). A lock with the presence flag never goes by age: only a proof that its
-- holder stopped moves it, however old it looks (a step of the Redis clock changes ages).
-- A token match takes exactly the lock the caller judged, never one written since.
-- Timestamps come from Redis TIME; epoch is incremented on every acquisition, and
-- lock.since is stamped '<epoch>,<now ms>': when the lock's current holder took it (a reader
-- trusts it only while its epoch is the record's: a build before lock.since takes locks
-- without stamping it, and the epoch it leaves disagrees).
--
-- Cost: a call's Redis time grows with every argument, field and number turned into a
-- string, so numbers the script writes are built as strings, stored values go back as they
-- were read, and the holder's fields are read only when the lock is held.
--
-- Answers:
--   {'OK', 'how,epoch,ver,at,schema,schemaMin,histAt,inboxSeq,now,fmt', data|false, sum|false,
--    trade|false, uids|false, meta|false, prevJob|false, {id1, body1, key1, sum1, ...}|false, more}
--       The words and integers in one string, an absent field empty (a table answer costs
--       Redis 0.05 to 0.1 µs an element). how: 'new', 'free', 'stolen', 'own' or 'expired';
--       epoch: the new epoch; histAt: when the last version was kept (ms); inboxSeq: how many
--       messages were ever sent; now: Redis time (ms); fmt and sum: the record's format and
--       checksum (the caller checks the data against it); prevJob: the holder the lock was
--       taken from ('' or false: none); then, when messages wait (inboxSeq > 0 and ARGV[8] >
--       0), the oldest inbox messages (id, body, idempotency key or '', checksum or '' each)
--       and more (1 when more may wait than came back, else 0). The elements from trade on are
--       left off when none of them holds anything (an absent one reads as false or 0).
--   {'LOCKED', job, token, presence ('1'|'0'), ageMs}
--   {'FORMAT', fmt}        the record has a format newer than ARGV[6]; nothing was changed
--   {'SCHEMA', schemaMin}  the record may not be read below schema version schemaMin, higher
--                          than ARGV[7]; nothing was changed (checked before the lock, so
--                          an older server refuses at once whoever holds it)
--   {'CORRUPT', field, why} a field (or key) the script relies on is not what this library
--                          writes; nothing was changed
local rec = KEYS[1]
local t = redis.call('TIME')
local f = redis.pcall('HMGET', rec, 'fmt', 'lock.token', 'epoch', 'ver', 'data', 'at', 'trade', 'uids', 'meta', 'schema',
  'schema.min', 'hist.at', 'inbox.seq', 'sum')
if f.err then
  return {'CORRUPT', '(record)', 'the record key is not a hash'}
end
local fmt, token, epoch = f[1], f[2], f[3]
local job -- the holder: read only when the lock is held

--#include isint
-- The format and the integer fields, all checked by one match (an absent field stands as
-- '0'); only when it fails are they checked one by one, in the order of their answers: the
-- format, a format newer than the caller's, then the first other field that is not an
-- integer. A call per field cost about 3 µs of the script (issue 35).
local i0, i1, i2, i3, i4, i5, i6, i7 = fmt or '0', f[11] or '0', f[10] or '0', epoch or '0', f[4] or '0', f[6] or '0',
  f[12] or '0', f[13] or '0'
if #i0 > 15 or #i1 > 15 or #i2 > 15 or #i3 > 15 or #i4 > 15 or #i5 > 15 or #i6 > 15 or #i7 > 15 or
    not string.find(i0 .. ',' .. i1 .. ',' .. i2 .. ',' .. i3 .. ',' .. i4 .. ',' .. i5 .. ',' .. i6 .. ',' .. i7,
      '^%d+,%d+,%d+,%d+,%d+,%d+,%d+,%d+$') then
  if fmt and not isint(fmt) then
    return {'CORRUPT', 'fmt', 'not an integer'}
  end
  if fmt and fmt ~= ARGV[6] and tonumber(fmt) > tonumber(ARGV[6]) then
    return {'FORMAT', fmt}
  end
  for _, i in ipairs({11, 10, 3, 4, 6, 12, 13}) do
    if f[i] and not isint(f[i]) then
      local names = {[3] = 'epoch', [4] = 'ver', [6] = 'at', [10] = 'schema', [11] = 'schema.min',
        [12] = 'hist.at', [13] = 'inbox.seq'}
      return {'CORRUPT', names[i], 'not an integer'}
    end
  end
end
if fmt and fmt ~= ARGV[6] and tonumber(fmt) > tonumber(ARGV[6]) then
  return {'FORMAT', fmt}
end
-- A profile keeps its schema numbers in 32 bits (record.MaxSchema): a larger one is not
-- what this library writes.
if #i1 >= 10 and tonumber(i1) > 2147483647 then
  return {'CORRUPT', 'schema.min', 'past 2147483647'}
end
if #i2 >= 10 and tonumber(i2) > 2147483647 then
  return {'CORRUPT', 'schema', 'past 2147483647'}
end
if f[11] and f[11] ~= ARGV[7] and tonumber(f[11]) > tonumber(ARGV[7]) then
  return {'SCHEMA', f[11]}
end

local how
if not epoch and not f[5] then -- never acquired (a record Send made holds only inbox.seq)
  how = 'new'
  -- Kept versions come only from saves under a lock, and an inbox only with the inbox.seq
  -- that counts it: either beside a record never acquired is what is left of a deleted
  -- one (even when a Send has made the record again since).
  if redis.call('EXISTS', KEYS[3]) > 0 or (not f[13] and redis.call('EXISTS', KEYS[2]) > 0) then
    return {'CORRUPT', '(record)', 'missing while its inbox or history remains (deleted or evicted)'}
  end
elseif not token or token == '' then
  how = 'free'
else
  -- The holder's fields, read only for a held lock: a free one (the cycle's) needs none.
  local g = redis.call('HMGET', rec, 'lock.job', 'lock.at', 'lock.presence')
  local lockAt, presence
  job, lockAt, presence = g[1], g[2], g[3]
  if not job or job == '' then
    return {'CORRUPT', 'lock.job', 'a lock without a holder'}
  end
  if presence and presence ~= '1' and presence ~= '0' then
    return {'CORRUPT', 'lock.presence', 'neither 1 nor 0'}
  end
  if not lockAt or not isint(lockAt) then
    return {'CORRUPT', 'lock.at', 'not an integer'}
  end
  -- the Redis clock in ms as a number, only for a held lock's age
  local age = t[1] * 1000 + math.floor(t[2] / 1000) - tonumber(lockAt)
  if age < -tonumber(ARGV[5]) and presence ~= '1' then
    return {'CORRUPT', 'lock.at', 'stamped ' .. (-age) .. ' ms ahead of the Redis clock'}
  end
  age = math.max(age, 0)
  local stealJob = ARGV[11] or ''
  if stealJob ~= '' and stealJob == job and ARGV[12] == token and (presence == '1' or job == ARGV[1]) then
    how = (job == ARGV[1]) and 'own' or 'stolen'
  elseif presence ~= '1' and age > tonumber(ARGV[4]) then
    how = 'expired'
  else
    return {'LOCKED', job, token, presence or '0', age}
  end
end

-- What is read next must be readable before anything is written.
if f[12] then
  local ty = redis.call('TYPE', KEYS[3])['ok']
  if ty ~= 'hash' and ty ~= 'none' then
    return {'CORRUPT', 'history', 'the history key is a ' .. ty .. ', not a hash'}
  end
end
local inbox, more
local seq = f[13]
if seq and seq ~= '0' and ARGV[8] == '0' then
  local ty = redis.call('TYPE', KEYS[2])['ok']
  if ty ~= 'stream' and ty ~= 'none' then
    return {'CORRUPT', 'inbox', 'the inbox key is a ' .. ty .. ', not a stream'}
  end
end
if seq and seq ~= '0' and ARGV[8] ~= '0' then
  local limit, budget, batch = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local start, bytes = '-', 0
  inbox, more = {}, 0
  while true do
    local entries = redis.pcall('XRANGE', KEYS[2], start, '+', 'COUNT', batch)
    if entries.err then
      return {'CORRUPT', 'inbox', 'the inbox key is not a stream'}
    end
    for _, e in ipairs(entries) do
      if #inbox >= 4 * limit or bytes >= budget then
        more = 1
        break
      end
      local body, key, sum = '', '', ''
      for i = 1, #e[2], 2 do
        local name = e[2][i]
        if name == 'b' then
          body = e[2][i + 1]
        elseif name == 'k' then
          key = e[2][i + 1]
        elseif name == 'c' then
          sum = e[2][i + 1]
        end
      end
      inbox[#inbox + 1] = e[1]
      inbox[#inbox + 1] = body
      inbox[#inbox + 1] = key
      inbox[#inbox + 1] = sum
      bytes = bytes + #body
      start = '(' .. e[1]
    end
    if more == 1 or #entries < batch then
      break
    end
    if #inbox >= 4 * limit or bytes >= budget then
      more = 1 -- perhaps: the next read would tell, and costs what it would return
      break
    end
  end
end

--#include nowms

-- The new epoch formatted once, as a string ('%d': exact for every integer isint admits):
-- Redis formats a number argument of redis.call again (snprintf, about 0.4 µs), and so
-- does a concatenation.
epoch = string.format('%d', (tonumber(epoch) or 0) + 1)
if how == 'new' then
  redis.call('HSET', rec, 'epoch', epoch, 'lock.job', ARGV[1], 'lock.token', ARGV[2], 'lock.at', now,
    'lock.presence', ARGV[3], 'lock.since', epoch .. ',' .. now, 'ver', '0', 'fmt', ARGV[6])
else
  redis.call('HSET', rec, 'epoch', epoch, 'lock.job', ARGV[1], 'lock.token', ARGV[2], 'lock.at', now,
    'lock.presence', ARGV[3], 'lock.since', epoch .. ',' .. now)
end
-- The words and integers in one string (a table answer costs Redis 0.05 to 0.1 µs an element;
-- an absent field is empty), then the data and the checksum as they were read.
local answer = {'OK', how .. ',' .. epoch .. ',' .. (f[4] or '0') .. ',' .. (f[6] or '') .. ',' .. (f[10] or '') .. ',' ..
  (f[11] or '') .. ',' .. (f[12] or '') .. ',' .. (seq or '') .. ',' .. now .. ',' ..
  ((how == 'new' and ARGV[6]) or fmt or ''), f[5], f[14]}
if f[7] or f[8] or f[9] or (job and job ~= '') or inbox then
  answer[5], answer[6], answer[7], answer[8], answer[9], answer[10] = f[7], f[8], f[9], job or false,
    inbox or false, more or 0
end
return answer
