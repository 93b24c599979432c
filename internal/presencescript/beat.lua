-- beat.lua: write one presence beat into a shard of the presence hash.
--
-- KEYS[1]  the shard hash. Fields: <JobID> = expiry in ms on the Redis clock
--          (TIME at the beat + TTL); "\0run" = run_id of the Redis process
--          that wrote "\0since" ("" when INFO has none, e.g. miniredis);
--          "\0since" = Redis time (ms) since which that run has been seen.
--          Meta names start with a NUL byte, which no JobID may. A field is a
--          plain integer.
-- KEYS[2]  the shard's owners hash, in the same Cluster slot: <JobID> = the
--          instance (process) that wrote the JobID's beat.
-- KEYS[3]  the shard's load hash, in the same Cluster slot: <JobID> =
--          "<sessions>@<ms>", the server's session count and the Redis time
--          it was written at. Written, and sampled by the cleaning, but no
--          answer depends on it: every call on it is a pcall, so a load hash
--          another tool broke never fails a beat.
-- ARGV[1]  JobID of the beating server (non-empty, never starts with "\0")
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  instance of the beating process
-- ARGV[4]  expected: the expiry (ms) this instance's last acknowledged beat
--          wrote, or 0 to go straight to the full path
-- ARGV[5]  check: 1 to compare the run meta with INFO server and to clean a
--          few expired fields, else 0 (or absent)
-- ARGV[6]  sessions: the session count to write into the load hash with a
--          written beat, or -1 (or absent) to leave it as it is
-- The common beat (no check, no count) sends ARGV[1] to ARGV[4] alone.
--
-- Fast path (expected > 0 and check 0): one HINCRBY moves our field from
-- `expected` to now + TTL. When the result is now + TTL, the field held what
-- we wrote last: nobody else beat this JobID since, and the beat is done in
-- two Redis commands (TIME, HINCRBY), answered {expiresAt, now, load}.
-- Otherwise the field is put back as it was (nobody sees the difference: a
-- script runs alone) and the full path decides.
--
-- Full path: read the field, its owner and the run meta. A live beat of
-- another instance (its owner entry names another instance) is left alone
-- and the beat is refused. A field whose owner entry is missing (the owners
-- hash was evicted or deleted by hand) is nobody's: the beat re-claims it.
-- Otherwise the beat and its owner are written, and the run meta when it is missing or unreadable, or,
-- when check is 1, names another run than INFO's. With check 1, three random
-- fields of the hash and two of the owners are looked at and the expired
-- ones dropped: O(1) work, and no answer depends on it. The load hash is
-- cleaned with them: an expired beat's load entry goes with it, and two
-- random load entries whose beat is gone are dropped. The beats of the
-- sampled owners and load entries are looked up in one HMGET.
--
-- A written beat with sessions >= 0 also writes the load entry: one HSET
-- more on the fast path, sent only when the count changed or on a check.
--
-- Encoding: the full path writes the field "\0enc" into the shard hash, and
-- a check into the owners and load hashes too, with a value longer than
-- hash-max-listpack-value (64 bytes by default): Redis then keeps each hash
-- a hashtable (it never converts one back), where a field is found in O(1),
-- instead of a listpack scanned from its start (up to 512 fields by
-- default, so up to 512 servers a shard). With 200 servers a beat's
-- HINCRBY and a check's lookups and samples cost about a third less. Like
-- the run meta, "\0enc" is no server: every reader and the cleaning skip
-- NUL-prefixed fields.
--
-- Answers, on the fast path, {expiresAt, now, load} (written, no reset, no
-- other instance); on the full path {code, expiresAt, reset, other,
-- otherExpiresAt, now, load}:
--   code        0: written. 1: refused: `other` has a live beat until
--               otherExpiresAt (ms). 2: written, taking the field over from
--               instance `other` whose beat had expired at otherExpiresAt
--               (0: unreadable).
--   expiresAt   this beat's expiry (ms, Redis clock); 0 when refused
--   reset       1 when the run meta was rewritten (a new Redis run: restart,
--               failover, or a hash that was lost), else 0
--   now         the Redis time of the beat (ms)
--   load        0: no count asked for (or the beat was refused); 1: written;
--               2: the write failed (the load key is not a hash)
local key, owners, load = KEYS[1], KEYS[2], KEYS[3]
local job, ttl, inst = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local expected, check = tonumber(ARGV[4]), ARGV[5] == '1'
local sessions = tonumber(ARGV[6] or '-1') or -1

local enc = 'presence: longer than hash-max-listpack-value, so that Redis keeps this hash a hashtable'

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = now + ttl

-- No local functions: the script's body runs afresh on every call, and
-- each would be a closure made (and collected) per beat.
if expected > 0 and not check then
  local delta = expires - expected
  local got = redis.pcall('HINCRBY', key, job, delta) -- an error table when the field is not an integer
  if type(got) == 'number' then
    if got == expires then
      if sessions < 0 then
        return {expires, now, 0}
      end
      local r = redis.pcall('HSET', load, job, string.format('%d@%.0f', sessions, now))
      return {expires, now, type(r) == 'number' and 1 or 2}
    end
    local before = got - delta
    if before == 0 then -- the field did not exist
      redis.call('HDEL', key, job)
    else
      redis.call('HSET', key, job, string.format('%.0f', before))
    end
  end
end

local cur = redis.call('HMGET', key, job, '\0run', '\0since')
local owner = redis.call('HGET', owners, job)
local val = tonumber(cur[1])

if val ~= nil and val > now and owner and owner ~= inst then
  return {1, 0, 0, owner, val, now, 0}
end
local code, other = 0, ''
if owner and owner ~= inst then
  code, other = 2, owner
end

local write = {key, job, string.format('%.0f', expires), '\0enc', enc}
local reset = 0
local since = tonumber(cur[3])
if check or not cur[2] or since == nil then
  local run = ''
  local info = redis.pcall('INFO', 'server') -- an error table where INFO is unsupported
  if type(info) == 'string' then
    local at = string.find(info, 'run_id:', 1, true) -- a plain search: no pattern tried at every byte
    run = at and string.match(info, '^%x+', at + 7) or ''
  end
  if cur[2] ~= run or since == nil then
    write[6], write[7], write[8], write[9] = '\0run', run, '\0since', string.format('%.0f', now)
    reset = 1
  end
end
redis.call('HSET', unpack(write))
if check then
  redis.call('HSET', owners, job, inst, '\0enc', enc)
elseif owner ~= inst then
  redis.call('HSET', owners, job, inst)
end
local loaded = 0
if sessions >= 0 then
  local r
  if check then
    r = redis.pcall('HSET', load, job, string.format('%d@%.0f', sessions, now), '\0enc', enc)
  else
    r = redis.pcall('HSET', load, job, string.format('%d@%.0f', sessions, now))
  end
  loaded = type(r) == 'number' and 1 or 2
end

if check then
  -- Bounded cleaning: an expired (or unreadable) beat goes with its owner;
  -- an owner whose beat is gone goes too. Correctness never depends on it;
  -- it only keeps the hashes from growing with servers that are gone.
  -- Negative counts: fields may repeat (harmless here), and Redis picks
  -- them without building a set of distinct ones, which on a hash of
  -- hundreds of fields costs more than the rest of the cleaning.
  local sample = redis.call('HRANDFIELD', key, -3, 'WITHVALUES')
  for i = 1, #sample, 2 do
    local f = sample[i]
    if string.byte(f, 1) ~= 0 then
      local v = tonumber(sample[i + 1])
      if v == nil or v < now then
        redis.call('HDEL', key, f)
        redis.call('HDEL', owners, f)
        redis.pcall('HDEL', load, f)
      end
    end
  end
  -- Two owners and two load entries; their beats looked up at once.
  local names, inLoad = {}, {}
  for _, f in ipairs(redis.call('HRANDFIELD', owners, -2)) do
    if string.byte(f, 1) ~= 0 then
      names[#names + 1] = f
    end
  end
  local sampled = redis.pcall('HRANDFIELD', load, -2)
  if type(sampled) == 'table' and not sampled.err then
    for _, f in ipairs(sampled) do
      if string.byte(f, 1) ~= 0 then
        names[#names + 1] = f
        inLoad[#names] = true
      end
    end
  end
  if #names > 0 then
    local beats = redis.call('HMGET', key, unpack(names))
    for i, f in ipairs(names) do
      if not beats[i] then
        if inLoad[i] then
          redis.pcall('HDEL', load, f)
        else
          redis.call('HDEL', owners, f)
        end
      end
    end
  end
end

return {code, expires, reset, other, (code == 2 and val) or 0, now, loaded}
