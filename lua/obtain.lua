-- include: clock fence records hold
-- obtain.lua: take every lock in KEYS for one owner, or none of them.
-- KEYS: holds, one per name (lib/hold.lua); on a quorum's
--       master, then as many fence records, one per hold (see recorded_fence)
-- ARGV: [token, ttl_ms, metadata, set_metadata ('1' or '0'),
--        with_records ('1' when KEYS carries the fence records, else '0'),
--        will_wait ('1': a busy answer marks the holds waited on, so their
--        release wakes this waiter), waited ('1': this owner waited before
--        this attempt: a new hold is marked waited on, for those behind it),
--        from (optional; '' or absent: none: another token whose hold this
--        owner takes over, Lock.take_over: where `from` holds, the hold is
--        this owner's as if re-entered, and now carries `token`, so `from`
--        holds nothing any more)]
-- Returns {1, fence} (a number, or its decimal text) when the owner now holds every key (taken now, or already
-- its own or `from`'s: the hold is re-entered, its fence kept, a newer one
-- where the hold has none recorded, and its metadata too unless
-- set_metadata is '1'), or {0, pttl} with the longest
-- remaining hold among the other owners.
local token, ttl_ms, metadata, set_metadata = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local with_records, will_wait, waited, from = ARGV[5] == '1', ARGV[6] == '1', ARGV[7] == '1', ARGV[8]

-- One name with no hold and no fence kept on record (no key), not on a
-- quorum's master (no fence record to read): taken with the clock's fence
-- (lib/clock.lua's now_us, lib/hold.lua's hold and its value, written out
-- here: this runs before the libraries are built). GET, not EXISTS: the
-- commands a Lock needs stay those a restricted ACL user is given
-- (tests/faults/test_chaos_security.py); pcall: a key of another type is
-- no free name. The fence is the clock's two parts joined as text and
-- returned as text (no table, no number formatted: each costs the server
-- more than a command).
if #KEYS == 1 and not with_records and not redis.pcall('GET', KEYS[1]) then
  local time = redis.call('TIME')
  local fence = time[1] .. string.sub('00000' .. time[2], -6)
  local value = token .. ' ' .. fence .. (waited and ' w' or ' ')
  if set_metadata then
    value = value .. ' ' .. metadata
  end
  redis.call('SET', KEYS[1], value, 'PX', ttl_ms)
  return {1, fence}
end
-- libraries here

local meta = set_metadata and metadata
if from == '' then
  from = nil
end
local locks, records = KEYS, {}
if with_records then
  locks, records = split_records(KEYS)
end

local busy, mine, last, fences, kept, unrecorded = nil, 0, 0, {}, {}, false
for i, key in ipairs(locks) do
  local owner, fence, flags, had = read_hold(key)
  fences[i] = fence
  if owner and owner ~= token and owner ~= from then
    busy = math.max(busy or -1, redis.call('PTTL', key))
    if will_wait then
      waited_on(key, owner, fence, flags, had)
    end
  elseif owner then
    mine = mine + 1
    kept[i] = {flags, had}
    unrecorded = unrecorded or fence == 0
  end
  last = math.max(last, fence, recorded_fence(records[i]))
end
if busy then
  return {0, busy}
end

-- Re-entered: the fence is kept, unless a hold has none in it yet (taken by
-- the transaction, its owner's fence unrecorded): this handle gets a newer
-- one from the clock, recorded, above the one the transaction's TIME gave.
if mine == #locks and unrecorded then
  local us = now_us()
  local fence = next_fence(last, us)
  for i, key in ipairs(locks) do
    hold(key, token, meta or kept[i][2], ttl_ms, fence, waited, fence > us, kept[i][1])
  end
  return {1, fence}
end
if mine == #locks then
  for i, key in ipairs(locks) do
    local fence = fences[i] ~= 0 and fences[i] or last
    hold(key, token, meta or kept[i][2], ttl_ms, fence, waited, false, kept[i][1])
  end
  return {1, last}
end

-- The fence: server time in microseconds, and above every fence still on record.
local us = now_us()
local fence = next_fence(last, us)
for i, key in ipairs(locks) do
  hold(key, token, meta, ttl_ms, fence, waited, fence > us)
  remember_fence(records[i], fence, us)
end
return {1, fence}
