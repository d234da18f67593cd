-- include: hold
-- refresh.lua: push the expiry of every lock in KEYS, only if one owner holds them all.
-- KEYS: holds (lib/hold.lua)
-- ARGV: [token, ttl_ms, fence (the owner's: recorded in a hold that has
--       none yet, a take by the transaction; '0': none to record)]
-- Returns 1 when renewed, 0 when any key is no longer this owner's (nothing changed).
local token, ttl_ms, fence = ARGV[1], ARGV[2], tonumber(ARGV[3])

-- One hold (every hold but a multi-lock's, which the transaction never takes).
if #KEYS == 1 then
  return renew_hold(KEYS[1], token, ttl_ms, fence) and 1 or 0
end
if not holds_all(KEYS, token) then
  return 0
end
for _, key in ipairs(KEYS) do
  redis.call('PEXPIRE', key, ttl_ms)
end
return 1
