-- begin.lua: open a trade's journal entry in state PREPARED.
--
-- KEYS[1]  the journal hash <ns>:trade:{<id>}
-- ARGV[1]  coordinator JobID
-- ARGV[2]  participant count n
-- ARGV[3]  retention in ms: a PREPARED entry expires this long after it is opened unless
--          it commits (an expired entry reads as no entry: aborted)
-- ARGV[4 .. 3+2n]  for each participant i (0-based): its descriptor (msgpack: driver, key,
--          token, ver at prepare), then its post-trade data image
-- ARGV[4+2n] the entry's checksum (CRC-32C of ARGV[1], ARGV[2] and every descriptor and
--          image: tradescript.BeginArgs)
--
-- Fields written: state, coord, at (ms, Redis TIME), n, p<i>, img<i>, and c
-- "<checksum>,<at>" (a copy of at: the script cannot compute a CRC).
-- Answers: {'OK'} | {'EXISTS', state}  (an entry exists: a recovery already aborted this id)
local j = KEYS[1]
local state = redis.call('HGET', j, 'state')
if state then
  return {'EXISTS', state}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[2])
local set = {'state', 'PREPARED', 'coord', ARGV[1], 'at', now, 'n', n, 'c', ARGV[4 + 2 * n] .. ',' .. now}
for i = 0, n - 1 do
  set[#set + 1] = 'p' .. i
  set[#set + 1] = ARGV[4 + 2 * i]
  set[#set + 1] = 'img' .. i
  set[#set + 1] = ARGV[5 + 2 * i]
end
redis.call('HSET', j, unpack(set))
redis.call('PEXPIRE', j, ARGV[3])
return {'OK'}
