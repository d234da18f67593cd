-- include: clock hold wake
-- release.lua: give up every lock in KEYS, only if one owner holds them all.
-- KEYS: lock hashes
-- ARGV: [token, force, channel]   force = '1' releases whoever holds them
--       (force_release); channel: where to announce the release ('' = each
--       key's own `<key>:wake`, which shares its hash tag)
-- Returns the number of keys released (0: not held by this owner, nothing changed).
local token, force, channel = ARGV[1], ARGV[2] == '1', ARGV[3] or ''

if not force and not holds_all(KEYS, token) then
  return 0
end

local now = now_us()
local released = 0
for _, key in ipairs(KEYS) do
  if redis.call('HEXISTS', key, 'token') == 1 then
    released = released + 1
    end_hold(key, tonumber(redis.call('HGET', key, 'fence')) or 0, now)
    if channel == '' then
      publish(key .. ':wake', '')
    end
  end
end
if released > 0 and channel ~= '' then
  publish(channel, '')
end
return released
