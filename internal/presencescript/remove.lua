-- remove.lua: delete this instance's beat, after a clean shutdown.
--
-- KEYS[1]  the shard hash (see beat.lua)
-- KEYS[2]  its owners hash
-- ARGV[1]  JobID
-- ARGV[2]  instance of the removing process
--
-- The beat goes only when it is ours (its owner is this instance) or has no
-- owner: a process that lost its JobID to another instance must not end that
-- instance's presence. Answers 1 when the field was ours to delete (whether
-- or not it was still there), 0 when another instance owns it.
local key, owners, job, inst = KEYS[1], KEYS[2], ARGV[1], ARGV[2]

local owner = redis.call('HGET', owners, job)
if owner and owner ~= inst then
  return 0
end
redis.call('HDEL', key, job)
redis.call('HDEL', owners, job)
return 1
