-- include: clock records hold
-- fence_raise.lua: settles a quorum hold's fence on one master: where `token`
-- holds every key, each key's fence becomes at least `fence` (the highest
-- any master of the quorum gave), and so does its fence record, kept until
-- this master's clock passes `fence`: a later hold on this master gets a
-- greater fence, whether this hold is released or expires first. A raised
-- hold is marked ahead of the clock (flag `a`, lib/hold.lua), so its
-- release keeps the fence until the clock passes it.
-- KEYS: holds (or an RWMutex's writer hold, lib/hold.lua), then as many fence records
--       (see recorded_fence), in the same order
-- ARGV: [token, fence]
-- Returns 1 when raised, 0 when `token` no longer holds them all (nothing changed).
local token, fence = ARGV[1], tonumber(ARGV[2])
local locks, records = split_records(KEYS)
if not holds_all(locks, token) then
  return 0
end
local us = now_us()
for i, key in ipairs(locks) do
  local owner, had, flags, meta = read_hold(key)
  if had < fence then
    if not flagged(flags, 'a') then
      flags = flags .. 'a'
    end
    redis.call('SET', key, hold_value(owner, fence, flags, meta), 'KEEPTTL')
  end
  remember_fence(records[i], fence, us)
end
return 1
