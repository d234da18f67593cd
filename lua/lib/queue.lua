-- include:
-- lib/queue.lua: the fair queue of a fair Lock, RWMutex or semaphore. A
-- waiter is in one or more queues (zsets: token -> arrival, server us), in
-- `alive` (zset: token -> until when it counts as alive, server ms) and in
-- `tags` (hash: token -> '<attempt> <patience_ms>': its latest attempt,
-- which a hand-over to it names, and how long a hand-over to it stays its own).
-- Defines: parse_tag, leave_queue, prune_waiters, enqueue, first_waiter.

-- A waiter's tag read back: attempt (text), patience (ms), or nil when
-- there is no tag (or a malformed one).
local function parse_tag(tag)
  local attempt, patience = string.match(tag or '', '^(%S+) (%d+)$')
  if attempt then
    return attempt, tonumber(patience)
  end
  return nil
end

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

-- The first waiter of `queue` that has a tag: token, attempt, patience.
-- Untagged ones are dropped (from `queue` and the queues given after it).
local function first_waiter(queue, alive, tags, ...)
  while true do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      return nil
    end
    local attempt, patience = parse_tag(redis.call('HGET', tags, head))
    if attempt then
      return head, attempt, patience
    end
    leave_queue(alive, tags, head, queue, ...)
  end
end
