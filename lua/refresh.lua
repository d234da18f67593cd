-- include: hold
-- refresh.lua: push the expiry of every lock in KEYS, only if one owner holds them all.
-- KEYS: holds (lib/hold.lua)
-- ARGV: [token, ttl_ms]
-- Returns 1 when renewed, 0 when any key is no longer this owner's (nothing changed).
local token, ttl_ms = ARGV[1], ARGV[2]

if not holds_all(KEYS, token) then
  return 0
end
for _, key in ipairs(KEYS) do
  redis.call('PEXPIRE', key, ttl_ms)
end
return 1
