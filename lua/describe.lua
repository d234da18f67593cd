-- include: clock hold
-- describe.lua: everything stored under one name, as a Lock and as an
-- RWMutex (for listing and inspecting by an operator; changes nothing).
-- KEYS: [lock hash, fair queue, fair liveness,
--        rw writer hash, rw readers zset (token -> expiry, server ms), rw intent,
--        rw queued readers, rw queued writers, rw liveness]
-- ARGV: none
-- Returns {lock holder, fair waiters, writer, readers, intent pttl,
--          queued readers, queued writers}:
--   holder and writer as inspect.lua's entries ({} when free);
--   readers: {token, ms left, token, ms left, ...}, live ones only;
--   waiters: queued ones still alive (whose liveness has not run out);
--   intent pttl: a waiting writer's intent (-2: none).
local lock, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local writer, readers, intent, qr, qw, rw_alive = KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local now = now_ms()

local function live(waiting, liveness)
  local n = 0
  for _, token in ipairs(redis.call('ZRANGE', waiting, 0, -1)) do
    local until_ms = tonumber(redis.call('ZSCORE', liveness, token))
    if until_ms and until_ms > now then
      n = n + 1
    end
  end
  return n
end

local reading = {}
local found = redis.call('ZRANGEBYSCORE', readers, '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #found, 2 do
  reading[#reading + 1] = found[i]
  reading[#reading + 1] = tonumber(found[i + 1]) - now
end

return {
  holder(lock), live(queue, alive), holder(writer), reading, redis.call('PTTL', intent),
  live(qr, rw_alive), live(qw, rw_alive),
}
