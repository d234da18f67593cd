-- common.lua: helpers shared by every script; prepended to each at build time,
-- after one line that sets PUBLISH: 'PUBLISH' on a single node, 'SPUBLISH'
-- (sharded pub/sub, Redis 7) in a Cluster.

-- Announces a release on `channel` (under the keys' hash tag, so in their slot).
local function publish(channel, message)
  redis.call(PUBLISH, channel, message)
end

-- The Redis server's clock, in microseconds and in milliseconds.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function now_ms()
  return math.floor(now_us() / 1000)
end

-- The fence of a new hold: the server's clock in microseconds (`us` when the
-- caller read it already), and above every fence still on record (`last`).
local function next_fence(last, us)
  return math.max(us or now_us(), last + 1)
end

-- A quorum's fence record (`<lock key>:fence`, under the key's hash tag, or
-- nil): the fence a quorum hold was raised to on this master, kept until this
-- master's clock passes it, however the hold ends (released or expired).
-- Returns that fence, 0 when there is none.
local function recorded_fence(record)
  if not record then
    return 0
  end
  return tonumber(redis.call('GET', record)) or 0
end

-- A quorum's master remembers `fence` in `record` (if any) until its clock,
-- now `us`, passes it: a fence above this master's clock (raised to another
-- master's, or above a fence on record) outlives the hold that carries it.
local function remember_fence(record, fence, us)
  if record and fence > us and recorded_fence(record) < fence then
    redis.call('SET', record, string.format('%.0f', fence), 'PX', math.floor((fence - us) / 1000) + 1)
  end
end

-- A quorum's KEYS: lock hashes, then their fence records in the same order.
-- Returns the two halves.
local function split_records(keys)
  local n = #keys / 2
  local locks, records = {}, {}
  for i = 1, n do
    locks[i], records[i] = keys[i], keys[n + i]
  end
  return locks, records
end

-- Whether `token` holds every lock hash in `keys`.
local function holds_all(keys, token)
  for _, key in ipairs(keys) do
    if redis.call('HGET', key, 'token') ~= token then
      return false
    end
  end
  return true
end

-- Ends the hold kept in `key` (fence `fence`) at server time `now` (us): the
-- key goes, unless the clock has not passed the fence yet (same microsecond,
-- or a clock step back): then only the fence stays, until the clock passes it.
local function end_hold(key, fence, now)
  if fence < now then
    redis.call('DEL', key)
  else
    redis.call('HDEL', key, 'token', 'meta')
    redis.call('PEXPIRE', key, math.floor((fence - now) / 1000) + 1)
  end
end

-- Who holds `lock`: {token, meta, fence, pttl}, or {} when nobody does.
local function holder(lock)
  local rec = redis.call('HMGET', lock, 'token', 'meta', 'fence')
  if not rec[1] then
    return {}
  end
  return {rec[1], rec[2] or '', tonumber(rec[3]) or 0, redis.call('PTTL', lock)}
end

-- `token` holds `lock` with fence `fence` for `ttl` ms. Its metadata is set
-- to `meta`, or kept when `meta` is false (re-entry without new metadata:
-- adopting a restored hold keeps its owner's). Returns the taken reply.
local function hold(lock, token, meta, ttl, fence)
  redis.call('HSET', lock, 'token', token, 'fence', string.format('%.0f', fence))
  if meta then
    redis.call('HSET', lock, 'meta', meta)
  end
  redis.call('PEXPIRE', lock, ttl)
  return {1, fence}
end

-- Fair mode. A waiter is in one or more queues (token -> arrival, server us),
-- in `alive` (token -> until when it counts as alive, server ms) and in
-- `tags` (token -> '<attempt> <patience_ms>': its latest attempt, which a
-- hand-over to it names, and how long a hand-over to it stays its own).

-- Takes `token` out of `alive`, `tags` and each queue given after them.
local function leave_queue(alive, tags, token, ...)
  for _, queue in ipairs({...}) do
    redis.call('ZREM', queue, token)
  end
  redis.call('ZREM', alive, token)
  redis.call('HDEL', tags, token)
end

-- Drops the waiters whose liveness ran out by `now` (ms).
local function prune_waiters(alive, tags, now, ...)
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', alive, '-inf', now)) do
    leave_queue(alive, tags, gone, ...)
  end
end

-- A waiter joins `queue` at server time `us` (once), counts as alive for
-- `patience` ms more, and is tagged with its attempt. The keys live as long
-- as their longest-lived waiter: a waiter with less patience never shortens
-- another's stay.
local function enqueue(queue, alive, tags, token, us, patience, attempt)
  if not redis.call('ZSCORE', queue, token) then
    redis.call('ZADD', queue, us, token)
  end
  redis.call('ZADD', alive, math.floor(us / 1000) + patience, token)
  redis.call('HSET', tags, token, attempt .. ' ' .. patience)
  for _, key in ipairs({queue, alive, tags}) do
    if redis.call('PTTL', key) < patience then
      redis.call('PEXPIRE', key, patience)
    end
  end
end

-- The first waiter of `queue` (at or before `before`, a score bound, when
-- given) that has a tag: token, attempt, patience. Untagged ones are dropped.
local function first_waiter(queue, alive, tags, ...)
  while true do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      return nil
    end
    local tag = redis.call('HGET', tags, head)
    local attempt, patience = string.match(tag or '', '^(%S+) (%d+)$')
    if attempt then
      return head, attempt, tonumber(patience)
    end
    leave_queue(alive, tags, head, queue, ...)
  end
end

-- A release (or a lapsed hand-over) gives `lock` (last fence `last`) to the
-- waiter `token` at server time `us`: it holds for its own `patience` ms
-- unless it renews, and is told on `channel` as '<token> <fence> <attempt>'.
-- The grant is valid only for that attempt: the waiter measures its lease
-- from when it sent that attempt, which ran before this script.
local function hand_over(lock, token, attempt, patience, last, us, channel)
  local fence = string.format('%.0f', math.max(us, last + 1))
  redis.call('HSET', lock, 'token', token, 'meta', '', 'fence', fence)
  redis.call('PEXPIRE', lock, patience)
  publish(channel, token .. ' ' .. fence .. ' ' .. attempt)
end

-- Fair Lock: `lock` is free; the first live waiter of `queue` gets it.
-- Returns whether one did.
local function serve_head(lock, queue, alive, tags, last, us, channel)
  local head, attempt, patience = first_waiter(queue, alive, tags)
  if not head then
    return false
  end
  leave_queue(alive, tags, head, queue)
  hand_over(lock, head, attempt, patience, last, us, channel)
  return true
end

-- A set of leases (an RWMutex's readers, a semaphore's permits) lives as
-- long as its latest lease, and so do the keys given after it.
local function expire_with_last_reader(readers, now, ...)
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  if last[1] then
    for _, key in ipairs({readers, ...}) do
      redis.call('PEXPIRE', key, tonumber(last[2]) - now)
    end
  end
end

-- Fair RWMutex: when no writer holds, lets in whoever is next: every reader
-- queued before the first queued writer (each for its own patience, named
-- on `channel` one a line as '<token> 0 <attempt>'), or, failing those and
-- once no reader is left, the first queued writer. Returns whether anyone
-- was let in.
local function rw_serve(writer, readers, qr, qw, alive, tags, us, channel)
  if redis.call('HEXISTS', writer, 'token') == 1 then
    return false
  end
  local now = math.floor(us / 1000)
  local w, w_attempt, w_patience = first_waiter(qw, alive, tags, qr)
  local bound = '+inf'
  if w then
    bound = '(' .. redis.call('ZSCORE', qw, w)
  end
  local lines = {}
  for _, reader in ipairs(redis.call('ZRANGEBYSCORE', qr, '-inf', bound)) do
    local tag = redis.call('HGET', tags, reader)
    local attempt, patience = string.match(tag or '', '^(%S+) (%d+)$')
    leave_queue(alive, tags, reader, qr, qw)
    if attempt then
      redis.call('ZADD', readers, 'GT', now + tonumber(patience), reader)
      lines[#lines + 1] = reader .. ' 0 ' .. attempt
    end
  end
  if #lines > 0 then
    expire_with_last_reader(readers, now)
    publish(channel, table.concat(lines, '\n'))
    return true
  end
  if w and redis.call('ZCARD', readers) == 0 then
    leave_queue(alive, tags, w, qr, qw)
    local last = tonumber(redis.call('HGET', writer, 'fence')) or 0
    hand_over(writer, w, w_attempt, w_patience, last, us, channel)
    return true
  end
  return false
end

-- Semaphore: `holders` (token -> expiry, server ms) and `data` (hash:
-- `permits`, the last `fence`, and `f:<token>` / `m:<token>`, each holder's
-- fence and metadata). Drops the holders whose lease ran out by `now`.
local function sem_prune(holders, data, now)
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', holders, '-inf', now)) do
    redis.call('HDEL', data, 'f:' .. gone, 'm:' .. gone)
  end
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
end

-- Semaphore: once no permit is held, the data goes too, as a Lock's hold
-- does: only a fence the server clock has not passed yet stays, until it has.
local function sem_tidy(holders, data, us)
  if redis.call('ZCARD', holders) > 0 then
    return
  end
  local fence = tonumber(redis.call('HGET', data, 'fence')) or 0
  redis.call('DEL', data)
  if fence >= us then
    redis.call('HSET', data, 'fence', string.format('%.0f', fence))
    redis.call('PEXPIRE', data, math.floor((fence - us) / 1000) + 1)
  end
end

-- Semaphore: `token` holds a permit with a new fence for `ms` ms.
local function sem_take(holders, data, token, meta, ms, us)
  local fence = math.max(us, (tonumber(redis.call('HGET', data, 'fence')) or 0) + 1)
  local f = string.format('%.0f', fence)
  redis.call('HSET', data, 'fence', f, 'f:' .. token, f, 'm:' .. token, meta)
  local now = math.floor(us / 1000)
  redis.call('ZADD', holders, now + ms, token)
  expire_with_last_reader(holders, now, data)
  return fence
end

-- Fair semaphore: hands every free permit to the next live waiters in line,
-- each for its own patience, named on `channel` one a line as
-- '<token> <fence> <attempt>'. Returns whether anyone was let in.
local function sem_serve(holders, data, queue, alive, tags, us, channel)
  local permits = tonumber(redis.call('HGET', data, 'permits')) or 0
  local free = permits - redis.call('ZCARD', holders)
  local lines = {}
  while free > 0 do
    local head, attempt, patience = first_waiter(queue, alive, tags)
    if not head then
      break
    end
    leave_queue(alive, tags, head, queue)
    local fence = sem_take(holders, data, head, '', patience, us)
    lines[#lines + 1] = head .. ' ' .. string.format('%.0f', fence) .. ' ' .. attempt
    free = free - 1
  end
  if #lines > 0 then
    publish(channel, table.concat(lines, '\n'))
    return true
  end
  return false
end

-- The operator's tools (describe.lua, force_release.lua): KEYS are every
-- part of one name and ARGV[i] is KEYS[i]'s '<kind> <role>' (from the key
-- layout table). Returns kind -> {role -> key}, and the kinds in order.
local function parts_by_kind()
  local kinds, order = {}, {}
  for i, key in ipairs(KEYS) do
    local kind, role = string.match(ARGV[i], '^(%S+) (%S+)$')
    if not kinds[kind] then
      kinds[kind] = {}
      order[#order + 1] = kind
    end
    kinds[kind][role] = key
  end
  return kinds, order
end
