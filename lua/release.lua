-- include: clock hold wake
-- release.lua: give up every lock in KEYS, only if one owner holds them all.
-- KEYS: holds (lib/hold.lua)
-- ARGV: [token, force ('1' releases whoever holds them: force_release),
--       channel (where to announce the release; '' = each key's own
--       `<key>:wake`, which shares its hash tag)]
-- Returns the number of keys released (0: not held by this owner, nothing changed).
-- A release is announced only where a waiter marked the hold waited on
-- (lib/hold.lua, `waited_on`): a release nobody waits for publishes nothing.
-- The server's clock is read only for a hold marked ahead of it (flag `a`):
-- any other hold's fence is a TIME the clock has passed since, so its key
-- goes at once (docs/design.md, "Fencing tokens").
local token, force, channel = ARGV[1], ARGV[2] == '1', ARGV[3] or ''

-- One hold of this owner's that no waiter marked and whose fence the clock
-- gave (no flag: lib/hold.lua's value, read here before the libraries are
-- built): its key goes, nothing to publish, no clock to read. Anything
-- other than a string is not this owner's.
if #KEYS == 1 and not force then
  local value = redis.pcall('GET', KEYS[1])
  if type(value) ~= 'string' then
    return 0
  end
  local owner, flags = string.match(value, '^(%S*) %d* (%a*)')
  if owner ~= token then
    return 0
  end
  if flags == '' then
    redis.call('DEL', KEYS[1])
    return 1
  end
end
-- libraries here

local recs = {}
for i, key in ipairs(KEYS) do
  local owner, fence, flags = read_hold(key)
  if not force and owner ~= token then
    return 0
  end
  recs[i] = {owner, fence, flags}
end

local now
local released, wake = 0, false
for i, key in ipairs(KEYS) do
  local owner, fence, flags = recs[i][1], recs[i][2], recs[i][3]
  if owner then
    released = released + 1
    local ahead, waited = flagged(flags, 'a'), flagged(flags, 'w')
    if ahead then
      now = now or now_us()
    end
    end_hold(key, fence, ahead and now)
    if waited and channel == '' then
      publish(key .. ':wake', '')
    end
    wake = wake or waited
  end
end
if wake and channel ~= '' then
  publish(channel, '')
end
return released
