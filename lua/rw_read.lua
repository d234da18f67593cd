-- include: clock hold leases
-- rw_read.lua: join the readers of an RWMutex, each reader with its own expiry.
-- KEYS: [writer (the hash), readers (a zset: token -> expiry, server ms), intent (a waiting writer's)]
-- ARGV: [token, ttl_ms, writer_preference ('1' or '0'),
--        will_wait ('1': a writer's hold found is marked waited on, so its
--        release wakes this reader)]
-- Returns {1, 0} when reading (joined now, or already a reader: expiry pushed),
-- or {0, wait_ms}: a writer holds (its pttl), or a writer waits (its intent's pttl).
-- Expired readers are left to the releases and writers, which prune them.
local writer, readers, intent = KEYS[1], KEYS[2], KEYS[3]
local token, ttl_ms, writer_preference, will_wait = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', ARGV[4] == '1'

-- Neither a writer's hash nor an intent (the usual case): one command says so.
local clear = redis.call('EXISTS', writer, intent) == 0
if not clear and redis.call('HEXISTS', writer, 'token') == 1 then
  if will_wait then
    waited_on(writer)
  end
  return {0, redis.call('PTTL', writer)}
end
local now = now_ms()
if not clear and writer_preference and redis.call('EXISTS', intent) == 1
    and (tonumber(redis.call('ZSCORE', readers, token)) or 0) <= now then
  return {0, redis.call('PTTL', intent)}
end

redis.call('ZADD', readers, now + ttl_ms, token)
expire_with_last_reader(readers, now)
return {1, 0}
