-- inspect.lua: who holds each lock in KEYS.
-- KEYS: lock hashes
-- ARGV: none
-- Returns one entry per key: {token, meta, fence, pttl} when held, {} when free.
local out = {}
for i, key in ipairs(KEYS) do
  local rec = redis.call('HMGET', key, 'token', 'meta', 'fence')
  if rec[1] then
    out[i] = {rec[1], rec[2] or '', tonumber(rec[3]) or 0, redis.call('PTTL', key)}
  else
    out[i] = {}
  end
end
return out
