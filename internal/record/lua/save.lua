-- save.lua: write a profile under its lock (save), or write it and clear the lock
-- (release). Fenced: nothing is written unless the lock is the profile's.
--
-- KEYS[1]  the record hash <ns>:{<driver>:<key>}
-- KEYS[2]  its inbox, a stream <record>:inbox (same slot)
-- KEYS[3]  its history, a hash <record>:hist (same slot; the layout is history.go's):
--          f<ver> (metadata) and f<ver>.1 ... (data) a version stored whole, v<ver> ...
--          one stored as a delta against the next newer kept version, d<ver> and t<ver>
--          a whole version with text metadata
-- KEYS[4]  its refusal counts, a hash <record>:tries: <id> = how many times a holder's
--          OnMessage refused message <id>, <id>:err = the last refusal, <id>:job = who
-- KEYS[5]  its dead letters, a stream <record>:dead: messages refused too often, each with
--          b (body), id (its inbox id), n (refusals), err, job and k (idempotency key)
-- KEYS[6]  its idempotency key times, a sorted set <record>:idem.at (see send.lua): a
--          dead-lettered message's key is pinned (+inf) so it is remembered while it lies
--          there
--          KEYS[2] to KEYS[6] are given only with the 'keep', 'refused' or 'applied'
--          option.
-- ARGV[1]  mode: 'save', 'release', or 'settle' (a save that lands only while the
--          record is marked with the 'trade' option's trade: a trade's idempotent image
--          write)
-- ARGV[2]  lock token of the profile
-- ARGV[3]  schema version of the new data, or '' when the call carries no new data (the
--          stored data stays)
-- ARGV[4]  the lowest schema version that may read the new data ('' without data)
-- ARGV[5]  the new data (opaque; '' without data)
-- ARGV[6]  the record's checksum after this write (record/sum.go: 8 hex digits of the CRC
--          of its data, schema, schema.min, user ids and metadata, as the caller computed
--          it), given with new data or new user ids and metadata, else '': written as the
--          field sum, "<ver>,<at>,<crc>" with this write's ver and the data's at, and the
--          record's format with it (fmt 2: builds that do not check a sum refuse it)
-- ARGV[7]  the write's place in its session ('0': none): a profile numbers its writes 1, 2, 3
--          ... and the record keeps the highest that landed, with the epoch it landed in
--          (lock.seq '<epoch>,<n>': every acquisition and move steps the epoch, so a new
--          session, of any build, starts from none). A write whose number is below it in the
--          same epoch is late: sent before a write that landed and delivered after it (a
--          connection that timed out, whose bytes the network still held), it would put older
--          data over newer: nothing is written (answer 10)
-- ARGV[8..] options, each a name then its values, in this order, each only when used:
--   'meta', uids, meta      new user ids and metadata (opaque)
--   'trade', id             the trade this write settles (its mark is cleared). While the
--                           record is marked with another trade every write is refused,
--                           but a bare release (no data), which gives the lock back and
--                           leaves the mark for the next loader
--   'keep', n, every, oldVer, always, seen, at, schema, schemaMin, nk, nr, nd, nk + nr name/value
--                           pairs, nd names
--                           history: keep n versions (0: none); the first data write at
--                           least `every` ms after the last kept version keeps the data
--                           it replaces (sent when the caller reckons a version is due),
--                           if it is version oldVer (the stored ver) and the record's at,
--                           schema and schema.min are the at, schema and schemaMin the
--                           caller wrote in its header (else flag 4: not kept); always =
--                           '1' keeps it whatever the interval (the data before a
--                           restore). The nk pairs are the kept version, whole, as the
--                           caller cut it (k<oldVer>, ...). When the record's hist.at is
--                           `seen` (the history is as the caller listed it), the nd fields
--                           (the trimmed versions', the rewritten one's) are deleted and
--                           the nr pairs (the previous newest, rewritten) written;
--                           otherwise the script trims the oldest beyond n itself (by
--                           count: HKEYS of the history; at most 100 per write) and
--                           rewrites nothing
--   'earlier', job, presence, n, token1 .. tokenN
--                           earlier tokens of the same profile (set after an adoption
--                           whose save has not landed), and the job id and presence flag
--                           ('1'|'0') written when the lock moves to ARGV[2]. The lock is
--                           the profile's when it names ARGV[2] or one of these, or when
--                           it is free and its last release was under one of these with
--                           nobody writing since (released.ver == ver: a release whose
--                           answer was lost, then an adoption). A write that finds it so
--                           moves the lock to ARGV[2], increments epoch and stamps
--                           lock.since '<epoch>,<now>' (a new session). A release that finds its own release (under ARGV[2]
--                           or an earlier token) already landed answers already-released
--                           without writing, unless it carries newer data, which it
--                           writes (the player went on after an adoption); a release
--                           under the very token that was released answers
--                           already-released too once another session came after it;
--                           a save under the very token that was released is late and
--                           refused (lost), unless the record holds its very data and
--                           checksum with nobody writing since the release: then it is
--                           the retry of a save that landed before it (already-stored).
--   'refused', max, job, n, id1, err1, sum1 .. idN, errN, sumN
--                           inbox messages the holder's OnMessage refused: each refusal is
--                           counted, and a message refused max times moves to the dead
--                           letters (0: never), with the message's fields (its checksum c
--                           among them) and the refusal's checksum (sumI, of idI, errI and
--                           job: record.RefusalSum) with a copy of its count as its field d
--                           ("<sumI>,<n>")
--   'applied', id1, id2 ..  (to the end) ids of inbox messages the new data has applied:
--                           deleted from the inbox by this same write, so a message is
--                           applied exactly once
--
-- Every accepted call refreshes lock.at from Redis TIME. A data write increments ver.
-- Three Redis calls in the common case: TIME, HMGET, HSET (plus XDEL for applied
-- messages, HDEL of trade on a settle, and the history writes when a version is kept).
-- Cost: a call's Redis time grows with every argument, field and number turned into a
-- string, so the common call carries 7 arguments and reads 6 fields; what only the rare
-- cases need (the release state, the history time) is read only by them.
--
-- Every field the script computes with is checked before anything is written.
--
-- Answers {code, ...}:
--   '1|2,ver,epoch,inboxSeq,at'  the common accepted write (1: saved, 2: released), with
--       nothing else to say: one string of integers, as a table answer costs Redis about
--       0.55 µs plus 0.05 to 0.1 an element
--   {1|2|3|4, ver, epoch, inboxSeq, at, moved (1|0), histAt, flags, dead[, tries]}  accepted.
--       1: saved. 2: released. 3: already released (a retried release found its own release
--       landed). 4: already settled (settle mode, the record no longer carries the trade).
--       9: already stored (a retried save found itself landed before its profile's release).
--       The elements after inboxSeq are left off when they are all 0 (an absent one reads
--       as 0). inboxSeq: how many
--       messages were ever sent to the profile. ver, epoch and inboxSeq are decimal strings
--       or integers (a value read from the record and not changed goes back as it was read,
--       a changed one as the string written: converting costs Redis time). at: the data's
--       write time this write stamped (ms; 0: it wrote no data). histAt: when this write kept
--       a version (ms; 0: it kept none). flags: 1 the history key is not a hash (no version
--       was kept), 2 the inbox key is not a stream (applied messages could not be deleted:
--       they are gone with it), 4 the version was due but not kept (the record's at or
--       schema is not what the caller's header says), 8 the version was kept as the caller
--       planned (its trims and rewrite; else the script trimmed by count). dead: how many
--       refused messages this write moved to the dead letters. tries, only with the
--       'refused' option: {id1, n1, ...}, how many times each refused message has been
--       refused now (n >= max: it was dead-lettered)
--   {5, job|'', token|''}   lost: the lock is not the profile's; nothing written
--   {6, tradeId}            trade: another trade is pending on the record; nothing written
--   {7, field, why, freed}  corrupt: a field the write relies on is not what this library
--                           writes; nothing written, except that a release under the
--                           profile's token frees the lock (freed 1) so the key is not
--                           wedged
--   {8}                     gone: the record no longer exists (deleted or evicted while
--                           held); nothing written
--   {10, n}                 late: a later write of the profile's session landed (n, from the
--                           record's lock.seq); nothing written
local rec = KEYS[1]
local mode, tok = ARGV[1], ARGV[2]
local hasData = ARGV[3] ~= ''
local t = redis.call('TIME')
local f = redis.pcall('HMGET', rec, 'lock.token', 'ver', 'epoch', 'trade', 'inbox.seq', 'lock.seq')
if f.err then
  return {7, '(record)', 'the record key is not a hash', 0}
end
if not f[3] then
  return {8} -- every record a lock was taken on has an epoch
end
local token, ver, epoch, trade, seq = f[1], f[2] or '0', f[3], f[4], f[5] or '0'

--#include nowms

--#include isint
-- ver, epoch, inbox.seq and lock.seq ('<epoch>,<n>') checked by one match (an absent one
-- stands as '0', '0,0'); only when it fails one by one, to name the field.
local i1, i3, i4 = f[2] or '0', f[5] or '0', f[6] or '0,0'
if #i1 > 15 or #epoch > 15 or #i3 > 15 or #i4 > 31 or
    not string.find(i1 .. ',' .. epoch .. ',' .. i3 .. ',' .. i4, '^%d+,%d+,%d+,%d+,%d+$') then
  for i, name in pairs({[2] = 'ver', [3] = 'epoch', [5] = 'inbox.seq', [6] = 'lock.seq'}) do
    local bad = f[i] and not isint(f[i])
    if i == 6 then
      bad = f[6] and (#f[6] > 31 or not string.find(f[6], '^%d+,%d+$'))
    end
    if bad then
      if mode == 'release' and token == tok then
        redis.call('HSET', rec, 'lock.token', '', 'lock.job', '', 'lock.at', now)
        return {7, name, 'not an integer', 1}
      end
      return {7, name, 'not an integer', 0}
    end
  end
end

-- The options (none in the common call, which skips looking for them).
local uids, meta, tradeID, keep, earlier0, earlier1, eJob, ePresence, applied
local refused0, refused1, refusedMax, refusedJob
if #ARGV > 7 then
  local i = 8
  if ARGV[i] == 'meta' then
    uids, meta, i = ARGV[i + 1], ARGV[i + 2], i + 3
  end
  if ARGV[i] == 'trade' then
    tradeID, i = ARGV[i + 1], i + 2
  end
  if ARGV[i] == 'keep' then
    keep = i + 1
    i = i + 12 + 2 * (tonumber(ARGV[i + 9]) + tonumber(ARGV[i + 10])) + tonumber(ARGV[i + 11])
  end
  if ARGV[i] == 'earlier' then
    eJob, ePresence = ARGV[i + 1], ARGV[i + 2]
    earlier0, earlier1 = i + 4, i + 3 + tonumber(ARGV[i + 3])
    i = earlier1 + 1
  end
  if ARGV[i] == 'refused' then
    refusedMax, refusedJob = tonumber(ARGV[i + 1]), ARGV[i + 2]
    refused0, refused1 = i + 4, i + 3 + 3 * tonumber(ARGV[i + 3])
    i = refused1 + 1
  end
  if ARGV[i] == 'applied' then
    applied = i + 1
  end
end

local moved = 0
if token ~= tok then
  -- Not the profile's token: the rare cases, which read the release state.
  local g = redis.call('HMGET', rec, 'lock.job', 'released', 'released.ver')
  local released = g[2]
  local heldEarlier, releasedEarlier = false, false
  if earlier0 then
    for j = earlier0, earlier1 do
      if token and token ~= '' and ARGV[j] == token then
        heldEarlier = true
      end
      if released and released ~= '' and ARGV[j] == released then
        releasedEarlier = true
      end
    end
  end
  local free = (not token) or token == ''
  local relOK = free and tonumber(g[3]) == tonumber(ver) -- released, and nobody wrote since
  local ownRelease = relOK and (released == tok or releasedEarlier)
  if ownRelease and mode == 'release' and not hasData and not uids then
    -- the retried release has nothing newer to write: the landed one stands
    return {3, ver, epoch, seq}
  end
  if mode == 'release' and released == tok and not relOK then
    -- this very release landed (its answer was lost) and another session
    -- came after it: the landed release stands, nothing is written
    return {3, ver, epoch, seq}
  end
  if mode == 'save' and released == tok and relOK and hasData then
    -- The record holds this very save's data and checksum (the sum field is
    -- '<ver>,<at>,<checksum>'), and its lock was let go under this very token with
    -- nobody writing since: this save landed before the profile let go (its answer
    -- was lost, and the client sent it again); the landed save stands, nothing is
    -- written.
    local s = redis.call('HMGET', rec, 'sum', 'data', 'uids', 'meta', 'at')
    local sum = s[1] or ''
    if sum == ver .. ',' .. (s[5] or '') .. ',' .. ARGV[6] and s[2] == ARGV[5] and
        (not uids or (s[3] == uids and s[4] == meta)) then
      return {9, ver, epoch, seq, s[5]}
    end
  end
  -- The lock may move to ARGV[2] when it still carries an earlier token (an
  -- adoption whose save has not landed), when the release that freed it was
  -- under an earlier token (an adoption of a release whose answer was lost), or
  -- for a release that carries newer data. A save under the very token that
  -- was released is late (it was in flight when the profile let go): refused.
  if not (heldEarlier or (relOK and releasedEarlier) or (ownRelease and mode == 'release')) then
    return {5, g[1] or '', token or ''}
  end
  moved = 1
end

-- A write older than one of its session that landed is late (see ARGV[7]); an accepted one
-- sets lock.seq to its own number in the record's epoch (one without a number leaves it).
local wseq = ARGV[7]
if wseq ~= '0' and f[6] then
  local seqEpoch, seqN = string.match(f[6], '^(%d+),(%d+)$')
  if seqEpoch == epoch and tonumber(seqN) > tonumber(wseq) then
    return {10, seqN}
  end
end
local seqField = f[6] or (epoch .. ',0')
if wseq ~= '0' then
  seqField = epoch .. ',' .. wseq
end

if mode == 'settle' and trade ~= tradeID then
  return {4, ver, epoch, seq}
end
if trade and trade ~= '' and trade ~= tradeID and (hasData or mode ~= 'release') then
  return {6, trade}
end

-- Keep version v (the data this write replaces) in hist, as the caller planned it when
-- the history is as it listed it, else trimming the oldest beyond ARGV[keep] itself. old
-- holds the record's hist.at.
local function keepVersion(hist, v, old, keep)
  local nk, nr, nd = tonumber(ARGV[keep + 8]), tonumber(ARGV[keep + 9]), tonumber(ARGV[keep + 10])
  local set0 = keep + 11
  local set1 = set0 + 2 * nk - 1 -- the kept version's fields: set0 .. set1
  local del = {}
  local planned = ARGV[keep + 4] ~= '' and ARGV[keep + 4] == old[4]
  if planned then
    set1 = set1 + 2 * nr -- and the rewritten version's
    for j = set1 + 1, set1 + nd do
      del[#del + 1] = ARGV[j]
    end
  else
    local fields, vers = {}, {} -- each version's fields; the versions
    for _, name in ipairs(redis.call('HKEYS', hist)) do
      local n = tonumber(string.match(name, '^[dtfvk](%d+)'))
      if n then
        if not fields[n] then
          fields[n] = {}
          vers[#vers + 1] = n
        end
        table.insert(fields[n], name)
      end
    end
    if not fields[v] then
      vers[#vers + 1] = v
    end
    table.sort(vers)
    for j, n in ipairs(vers) do
      -- v's are written again after; of the oldest beyond n, at most 100 go per write (a
      -- lowered History frees the rest over the next writes, none holding Redis long)
      if n == v or (j <= #vers - tonumber(ARGV[keep]) and j <= 100) then
        for _, name in ipairs(fields[n] or {}) do
          del[#del + 1] = name
        end
      end
    end
  end
  for j = 1, #del, 1000 do
    redis.call('HDEL', hist, unpack(del, j, math.min(j + 999, #del)))
  end
  for j = set0, set1, 2000 do
    redis.call('HSET', hist, unpack(ARGV, j, math.min(set1, j + 1999)))
  end
  return planned
end

-- A version kept in the history (rare: at most once an interval, and before a restore).
local histAt, flags = 0, 0
if hasData and keep and tonumber(ARGV[keep]) > 0 and tonumber(ARGV[keep + 2]) == tonumber(ver) then
  local ty = redis.call('TYPE', KEYS[3])['ok']
  if ty ~= 'hash' and ty ~= 'none' then
    flags, keep = 1, nil -- the data is written all the same; only the version is not kept
  end
end
if keep and hasData and tonumber(ARGV[keep]) > 0 and tonumber(ARGV[keep + 2]) == tonumber(ver) then
  local old = redis.call('HMGET', rec, 'at', 'schema', 'schema.min', 'hist.at')
  local nowMS = t[1] * 1000 + math.floor(t[2] / 1000)
  if ARGV[keep + 3] == '1' or nowMS - (tonumber(old[4]) or 0) >= tonumber(ARGV[keep + 1]) then
    if (old[1] or '') == ARGV[keep + 5] and (old[2] or '0') == ARGV[keep + 6] and (old[3] or '0') == ARGV[keep + 7] then
      if keepVersion(KEYS[3], tonumber(ver), old, keep) then
        flags = flags + 8
      end
      histAt = nowMS
    else
      flags = flags + 4
    end
  end
end
if tradeID and trade == tradeID then
  redis.call('HDEL', rec, 'trade')
end
local dead, tries = 0, nil
if refused0 then
  tries = {}
  for j = refused0, refused1, 3 do
    local id, err = ARGV[j], ARGV[j + 1]
    local n = redis.call('HINCRBY', KEYS[4], id, 1)
    tries[#tries + 1] = id
    tries[#tries + 1] = n
    redis.call('HSET', KEYS[4], id .. ':err', err, id .. ':job', refusedJob)
    if refusedMax > 0 and n >= refusedMax then
      local e = redis.pcall('XRANGE', KEYS[2], id, id)
      if not e.err and #e == 1 then
        local letter = {'XADD', KEYS[5], '*', 'id', id, 'n', n, 'err', err, 'job', refusedJob, 'd',
          ARGV[j + 2] .. ',' .. n}
        for k = 1, #e[1][2], 2 do
          local name, value = e[1][2][k], e[1][2][k + 1]
          if name == 'b' or name == 'k' or name == 'c' then
            letter[#letter + 1] = name
            letter[#letter + 1] = value
          end
          if name == 'k' then
            redis.call('ZADD', KEYS[6], 'XX', '+inf', value)
          end
        end
        redis.call(unpack(letter))
        redis.call('XDEL', KEYS[2], id)
        dead = dead + 1
      end
      redis.call('HDEL', KEYS[4], id, id .. ':err', id .. ':job')
    end
  end
end
if applied and applied <= #ARGV then
  local deleted = redis.pcall('XDEL', KEYS[2], unpack(ARGV, applied))
  if type(deleted) == 'table' and deleted.err then
    flags = flags + 2
  elseif redis.call('EXISTS', KEYS[4]) == 1 then
    for j = applied, #ARGV do
      redis.call('HDEL', KEYS[4], ARGV[j], ARGV[j] .. ':err', ARGV[j] .. ':job')
    end
  end
end
if hasData then
  -- formatted once, as a string ('%d': exact for every integer isint admits): Redis
  -- formats a number argument of redis.call again (snprintf, about 0.4 µs), and a release
  -- writes ver twice and in the sum
  ver = string.format('%d', tonumber(ver) + 1)
end

local code = (mode == 'release') and 2 or 1
if moved == 0 and not uids and histAt == 0 and flags == 0 and dead == 0 then
  -- The common writes, each one HSET with its fields spelled out (building a table
  -- of them costs more than the HSET).
  if hasData and code == 2 then
    redis.call('HSET', rec, 'data', ARGV[5], 'ver', ver, 'at', now, 'schema', ARGV[3], 'schema.min', ARGV[4],
      'sum', ver .. ',' .. now .. ',' .. ARGV[6], 'fmt', '2',
      'lock.at', now, 'released', tok, 'released.ver', ver, 'lock.token', '', 'lock.job', '', 'lock.seq', seqField)
  elseif hasData then
    redis.call('HSET', rec, 'data', ARGV[5], 'ver', ver, 'at', now, 'schema', ARGV[3], 'schema.min', ARGV[4],
      'sum', ver .. ',' .. now .. ',' .. ARGV[6], 'fmt', '2', 'lock.at', now, 'lock.seq', seqField)
  elseif code == 2 then
    redis.call('HSET', rec, 'lock.at', now, 'released', tok, 'released.ver', ver, 'lock.token', '', 'lock.job', '',
      'lock.seq', seqField)
  else
    redis.call('HSET', rec, 'lock.at', now, 'lock.seq', seqField)
  end
  if tries then
    return {code, ver, epoch, seq, hasData and now or 0, 0, 0, 0, 0, tries}
  end
  -- The common answer, one string of integers: a table answer costs Redis about 0.7 µs more.
  return (code == 2 and '2,' or '1,') .. ver .. ',' .. epoch .. ',' .. seq .. ',' .. (hasData and now or '0')
end

-- Any other write: the fields gathered in a table, written by one HSET.
local set = {'HSET', rec, 'lock.at', now}
local function put(k, v)
  set[#set + 1] = k
  set[#set + 1] = v
end
if hasData then
  put('data', ARGV[5]); put('ver', ver); put('at', now); put('schema', ARGV[3]); put('schema.min', ARGV[4])
  put('sum', ver .. ',' .. now .. ',' .. ARGV[6]); put('fmt', '2')
end
if histAt > 0 then
  put('hist.at', now)
end
if uids then
  put('uids', uids); put('meta', meta)
  if not hasData and ARGV[6] ~= '' then
    put('sum', ver .. ',' .. (redis.call('HGET', rec, 'at') or '') .. ',' .. ARGV[6]); put('fmt', '2')
  end
end
if moved == 1 then
  epoch = string.format('%d', (tonumber(epoch) or 0) + 1)
  put('epoch', epoch)
  if wseq ~= '0' then
    seqField = epoch .. ',' .. wseq -- the new session's epoch
  end
end
put('lock.seq', seqField)
if code == 2 then
  put('released', tok); put('released.ver', ver); put('lock.token', ''); put('lock.job', '')
elseif moved == 1 then
  put('lock.token', tok); put('lock.job', eJob); put('lock.presence', ePresence); put('lock.since', epoch .. ',' .. now)
end
redis.call(unpack(set))
return {code, ver, epoch, seq, hasData and now or 0, moved, histAt, flags, dead, tries}
