-- movemark.lua: writes a move that ended without a flip (CANCELLED: refused, expired, not
-- answered or abandoned) as the record's last move, for inspect. The source writes it
-- once the move's outcome is known, off the move's path. Fenced by the source's lock
-- token: it lands only while the source still holds the lock, so it never overwrites the
-- COMMITTED of a flip that landed (a flip hands the lock to another token) nor marks a
-- record someone else holds. It writes no data, ver, epoch or lock field.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- ARGV[1]  the holder's (source's) lock token
-- ARGV[2]  the move's id
-- ARGV[3]  its state (CANCELLED)
-- ARGV[4]  the source's JobID (move.from)
-- ARGV[5]  the target's JobID (move.to)
-- ARGV[6]  why it ended so (move.why), one line
--
-- Answers: 1 written (move.at is the Redis time); 0 nothing written: the lock is not
-- the token's, there is no record, or the key is not a hash.
local f = redis.pcall('HMGET', KEYS[1], 'lock.token', 'epoch')
if f.err or not f[2] or f[1] ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local now = t[1] .. string.sub(string.rep('0', 6 - #t[2]) .. t[2], 1, 3)
redis.call('HSET', KEYS[1], 'move.id', ARGV[2], 'move.state', ARGV[3], 'move.from', ARGV[4], 'move.to', ARGV[5],
  'move.at', now, 'move.why', ARGV[6])
return 1
