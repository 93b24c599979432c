-- remove.lua: delete this instance's beat, after a clean shutdown.
--
-- KEYS[1]  the shard hash (see beat.lua)
-- KEYS[2]  its owners hash
-- KEYS[3]  its load hash (see beat.lua; its entry goes with the beat)
-- ARGV[1]  JobID
-- ARGV[2]  instance of the removing process
--
-- The beat goes only when it is ours (its owner is this instance) or has no
-- owner: a process that lost its JobID to another instance must not end that
-- instance's presence. Answers 1 when the field was ours to delete (whether
-- or not it was still there), 0 when another instance owns it.
local key, owners, load, job, inst = KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2]

local owner = redis.call('HGET', owners, job)
if owner and owner ~= inst then
  return 0
end
redis.call('HDEL', key, job)
redis.call('HDEL', owners, job)
redis.pcall('HDEL', load, job) -- a load key another tool broke must not fail a removal
return 1
