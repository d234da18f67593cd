-- include: clock hold wake
-- release.lua: give up every lock in KEYS, only if one owner holds them all.
-- KEYS: lock hashes
-- ARGV: [token, force ('1' releases whoever holds them: force_release),
--       channel (where to announce the release; '' = each key's own
--       `<key>:wake`, which shares its hash tag)]
-- Returns the number of keys released (0: not held by this owner, nothing changed).
-- A release is announced only where a waiter marked the hold waited on
-- (lib/hold.lua, `waited_on`): a release nobody waits for publishes nothing.
-- The server's clock is read only for a hold marked ahead of it (field `a`):
-- any other hold's fence is a TIME the clock has passed since, so its key
-- goes at once (docs/design.md, "Fencing tokens").
local token, force, channel = ARGV[1], ARGV[2] == '1', ARGV[3] or ''

local recs = {}
for i, key in ipairs(KEYS) do
  recs[i] = redis.call('HMGET', key, 'token', 'fence', 'w', 'a')
  if not force and recs[i][1] ~= token then
    return 0
  end
end
-- One hold of this owner's that no waiter marked and whose fence the clock
-- gave (no `w`, no `a`: lib/hold.lua): its key goes, nothing to publish, no
-- clock to read, before the libraries are built.
if #KEYS == 1 and not force and not recs[1][3] and not recs[1][4] then
  redis.call('DEL', KEYS[1])
  return 1
end
-- libraries here

local now
local released, wake = 0, false
for i, key in ipairs(KEYS) do
  local rec = recs[i]
  if rec[1] then
    released = released + 1
    if rec[4] then
      now = now or now_us()
    end
    end_hold(key, tonumber(rec[2]) or 0, rec[4] and now)
    if rec[3] and channel == '' then
      publish(key .. ':wake', '')
    end
    wake = wake or rec[3] ~= false
  end
end
if wake and channel ~= '' then
  publish(channel, '')
end
return released
