-- wipe.lua: erase a profile record (data, lock, history slots), for an erasure request.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
--
-- Unconditional: a holder elsewhere keeps playing until its next save, which finds the
-- lock gone (ErrLockLost) and cannot recreate the record, because every write is fenced
-- by the lock token.
--
-- Answers: the number of keys deleted (0 or 1).
return redis.call('DEL', KEYS[1])
