-- move.lua: the lease flip of a move (Profile.MoveTo). The holder hands its own lock,
-- with the data as it is at the move, to the server that accepted the move: one fenced
-- write, which lands only if the lock is still the holder's and the move's expiry (on
-- this Redis's clock) has not passed. It is a release by the holder to a named server
-- (internal/lockrule): the lock never passes through a free state, so no third server
-- can take it between the two owners, and it never has two.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox, a stream <record>:inbox (same slot)
-- KEYS[3]  its refusal counts, a hash <record>:tries (same slot)
-- ARGV[1]  the holder's lock token (the source's)
-- ARGV[2]  the move's expiry, ms on this Redis's clock: after it the flip never lands
-- ARGV[3]  the target's JobID (written as lock.job)
-- ARGV[4]  the target's lock token (written as lock.token)
-- ARGV[5]  the target's presence flag, '1' or '0' (written as lock.presence)
-- ARGV[6]  the move's id
-- ARGV[7]  the source's JobID (written as move.from)
-- ARGV[8]  schema version of the new data, or '' when the call carries no new data
-- ARGV[9]  the lowest schema version that may read the new data ('' without data)
-- ARGV[10] the new data (opaque; '' without data)
-- ARGV[11] the record's checksum after this write (record/sum.go), given with new data or
--          new user ids and metadata, else ''
-- ARGV[12] '1' when new user ids and metadata follow, else '0'
-- ARGV[13] the new user ids (opaque; '' without them)
-- ARGV[14] the new metadata (opaque; '' without them)
-- ARGV[15..] ids of inbox messages the data has applied: deleted from the inbox (and
--          their refusal counts) by this same write, so a message is applied once
--
-- The flip writes the data (as save.lua does: data, ver + 1, at, schema, schema.min,
-- sum, fmt), the lock (lock.token, lock.job, lock.presence the target's, lock.at the
-- Redis time, epoch + 1: a new session, lock.since '<epoch>,<now>') and the move (move.id, move.state COMMITTED,
-- move.from, move.to, move.at; move.why, which movemark.lua writes for a cancelled move, emptied). Every field it computes with is checked first.
--
-- Answers:
--   {1, ver, epoch, at, lockAt, inboxSeq}  flipped: ver and epoch as they are now, at the
--                           data's write time (ms), lockAt the Redis time of the flip
--   {5, job|'', token|''}   lost: the lock is not the holder's; nothing written
--   {6, tradeId}            a trade is pending on the record; nothing written
--   {7, field, why}         corrupt: a field is not what this library writes; nothing
--                           written
--   {8}                     gone: the record no longer exists; nothing written
--   {9, now}                expired: the move's expiry passed (now: the Redis time, ms);
--                           nothing written
local rec = KEYS[1]
local t = redis.call('TIME')
local f = redis.pcall('HMGET', rec, 'lock.token', 'ver', 'epoch', 'trade', 'inbox.seq', 'at', 'lock.job')
if f.err then
  return {7, '(record)', 'the record key is not a hash'}
end
if not f[3] then
  return {8}
end
local token, ver, epoch, trade, seq, at = f[1], f[2] or '0', f[3], f[4], f[5] or '0', f[6] or ''
if token ~= ARGV[1] then
  return {5, f[7] or '', token or ''}
end
local now = t[1] .. string.sub(string.rep('0', 6 - #t[2]) .. t[2], 1, 3)
if tonumber(now) > tonumber(ARGV[2]) then
  return {9, now}
end
local function isint(v)
  return string.match(v, '^%d+$') ~= nil and #v <= 15
end
for i, name in pairs({[2] = 'ver', [3] = 'epoch', [5] = 'inbox.seq'}) do
  if f[i] and not isint(f[i]) then
    return {7, name, 'not an integer'}
  end
end
if trade and trade ~= '' then
  return {6, trade}
end

local hasData = ARGV[8] ~= ''
local set = {'HSET', rec, 'lock.token', ARGV[4], 'lock.job', ARGV[3], 'lock.presence', ARGV[5],
  'lock.at', now, 'move.id', ARGV[6], 'move.state', 'COMMITTED', 'move.from', ARGV[7],
  'move.to', ARGV[3], 'move.at', now, 'move.why', ''}
local function put(k, v)
  set[#set + 1] = k
  set[#set + 1] = v
end
epoch = tonumber(epoch) + 1
put('epoch', epoch)
put('lock.since', epoch .. ',' .. now) -- when the target's session took the lock (Driver.Where)
if hasData then
  ver = tostring(tonumber(ver) + 1)
  at = now
  put('data', ARGV[10]); put('ver', ver); put('at', now); put('schema', ARGV[8]); put('schema.min', ARGV[9])
  put('sum', ver .. ',' .. now .. ',' .. ARGV[11]); put('fmt', '2')
end
if ARGV[12] == '1' then
  put('uids', ARGV[13]); put('meta', ARGV[14])
  if not hasData and ARGV[11] ~= '' then
    put('sum', ver .. ',' .. at .. ',' .. ARGV[11]); put('fmt', '2')
  end
end
redis.call(unpack(set))
if #ARGV >= 15 then
  local deleted = redis.pcall('XDEL', KEYS[2], unpack(ARGV, 15))
  if not (type(deleted) == 'table' and deleted.err) and redis.call('EXISTS', KEYS[3]) == 1 then
    for j = 15, #ARGV do
      redis.call('HDEL', KEYS[3], ARGV[j], ARGV[j] .. ':err', ARGV[j] .. ':job')
    end
  end
end
return {1, ver, epoch, at, now, seq}
