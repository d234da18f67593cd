-- include: fence
-- lib/records.lua: a quorum's fence records (`<lock key>:fence`, under the
-- key's hash tag): the fence a quorum hold was raised to on this master,
-- kept until this master's clock passes it, however the hold ends.
-- Defines: recorded_fence, remember_fence, split_records.

-- The fence in `record` (or nil: no record), 0 when there is none.
local function recorded_fence(record)
  if not record then
    return 0
  end
  return tonumber(redis.call('GET', record)) or 0
end

-- A quorum's master remembers `fence` in `record` (if any) until its clock,
-- now `us`, passes it: a fence above this master's clock (raised to another
-- master's, or above a fence on record) outlives the hold that carries it.
local function remember_fence(record, fence, us)
  if record and fence > us and recorded_fence(record) < fence then
    redis.call('SET', record, fence_text(fence), 'PX', math.floor((fence - us) / 1000) + 1)
  end
end

-- A quorum's KEYS: lock hashes, then their fence records in the same order.
-- Returns the two halves.
local function split_records(keys)
  local n = #keys / 2
  local locks, records = {}, {}
  for i = 1, n do
    locks[i], records[i] = keys[i], keys[n + i]
  end
  return locks, records
end
