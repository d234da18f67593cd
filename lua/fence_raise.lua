-- fence_raise.lua: settles a quorum hold's fence on one master: where `token`
-- holds every key, each key's fence becomes at least `fence` (the highest
-- any master of the quorum gave), so a later hold on this master gets a
-- greater one. A released key keeps its fence until the clock passes it.
-- KEYS: lock hashes (or an RWMutex's writer hash)
-- ARGV: [token, fence]
-- Returns 1 when raised, 0 when `token` no longer holds them all (nothing changed).
local token, fence = ARGV[1], tonumber(ARGV[2])
if not holds_all(KEYS, token) then
  return 0
end
for _, key in ipairs(KEYS) do
  if (tonumber(redis.call('HGET', key, 'fence')) or 0) < fence then
    redis.call('HSET', key, 'fence', string.format('%.0f', fence))
  end
end
return 1
