-- include: fence
-- lib/hold.lua: a hold, the one string key a Lock, a fair Lock, an
-- election's term and an RWMutex's writer keep (docs/design.md, "The hold
-- as one string"). Its value is
--     <token> <fence> <flags>[ <meta>]
-- the owner's token (no space in it), its fence in decimal, its flags (`w`:
-- a waiter waits for it, see `waited_on`; `a`: its fence is ahead of the
-- server's clock, see `hold`), then, after one more space, the metadata its
-- owner gave, if any (which may hold spaces); its PX is the hold's ttl. A
-- hold a transaction took (src/primitive/exclusive.rs, `take_free`: a
-- free name, taken without a script) has no fence in its value: the owner
-- has it from the transaction's TIME, and records it with its first
-- renewal (`renew_hold`); until then a reader sees fence 0, and a step
-- that hands the hold to another handle gives it a newer fence from the
-- clock (obtain.lua). A value with no token keeps a fence past its hold
-- (`end_hold`). A key of
-- another type is a hold of ferrolock 0.1 (a hash, met during a rolling
-- upgrade): read with that layout, flag `o`, never rewritten but for the
-- waiter's mark that version reads too. Anything else (a string of another
-- form, a hash with neither field) is another program's: refused with an
-- error, as a key of another type always was.
-- Defines: read_hold, flagged, holds_all, holder, hold_value, renew_hold, hold, waited_on, end_hold.

-- What `lock` holds: its token (false: nobody), fence (0: none), flags and
-- metadata (false: none given), read with one GET.
local function read_hold(lock)
  local value = redis.pcall('GET', lock)
  if not value then
    return false, 0, '', false
  end
  local token, fence, flags, rest
  if type(value) == 'table' then
    local rec = redis.call('HMGET', lock, 'token', 'fence', 'meta', 'w')
    token, fence, rest = rec[1], rec[2], rec[3]
    if token or fence then
      return token, tonumber(fence) or 0, rec[4] and 'ow' or 'o', rest
    end
  else
    token, fence, flags, rest = string.match(value, '^(%S*) (%d*) (%a*)(.*)$')
  end
  if not token then
    error({err = 'WRONGTYPE ' .. lock .. ' holds a value ferrolock did not write: another program uses this key'})
  end
  return token ~= '' and token, tonumber(fence) or 0, flags, rest ~= '' and string.sub(rest, 2)
end

-- Whether `flags` (as read_hold returns them) carry `flag`.
local function flagged(flags, flag)
  return string.find(flags, flag, 1, true) ~= nil
end

-- Whether `token` holds every lock in `keys`.
local function holds_all(keys, token)
  for _, key in ipairs(keys) do
    if read_hold(key) ~= token then
      return false
    end
  end
  return true
end

-- Who holds `lock`: {token, meta, fence, pttl}, or {} when nobody does; meta
-- is false (a nil reply) when the holder gave none, '' when it gave ''.
local function holder(lock)
  local token, fence, _, meta = read_hold(lock)
  if not token then
    return {}
  end
  return {token, meta, fence, redis.call('PTTL', lock)}
end

-- The value of a hold (see the top of this file); fence 0: none in it.
local function hold_value(token, fence, flags, meta)
  local value = token .. ' ' .. (fence ~= 0 and fence_text(fence) or '') .. ' ' .. flags
  if meta then
    return value .. ' ' .. meta
  end
  return value
end

-- `token` holds `lock` for `ttl` ms more: false when it does not hold it
-- (nothing changed). A hold whose value has no fence yet (a take by the
-- transaction) gets `fence`, its owner's, written in (0: none to record).
local function renew_hold(lock, token, ttl, fence)
  local owner, had, flags, meta = read_hold(lock)
  if owner ~= token then
    return false
  end
  if had == 0 and fence ~= 0 then
    redis.call('SET', lock, hold_value(token, fence, flags, meta), 'PX', ttl)
  else
    redis.call('PEXPIRE', lock, ttl)
  end
  return true
end

-- `token` holds `lock` with fence `fence` for `ttl` ms, with metadata `meta`
-- (false: none). `flags`: the marks the hold had and keeps (a re-entered
-- hold's, as read_hold gave them; nil for a new hold). `waited`: the new
-- holder waited for it, so others may wait still: the hold is marked waited
-- on (`w`), and its release wakes them (see `waited_on`). `ahead`: the
-- fence is above the server's clock (it came from the last fence + 1, not
-- from TIME): marked (`a`), so its release reads the clock to keep the
-- fence until the clock passes it (`end_hold`); a hold without the mark has
-- a fence the clock gave, which the release deletes without reading TIME.
-- One SET. Returns the taken reply.
local function hold(lock, token, meta, ttl, fence, waited, ahead, flags)
  flags = flags or ''
  if flagged(flags, 'o') then
    flags = string.gsub(flags, 'o', '')
  end
  if waited and not flagged(flags, 'w') then
    flags = flags .. 'w'
  end
  if ahead and not flagged(flags, 'a') then
    flags = flags .. 'a'
  end
  redis.call('SET', lock, hold_value(token, fence, flags, meta), 'PX', ttl)
  return {1, fence}
end

-- A waiter found `lock` held and will wait: the hold is marked waited on, so
-- its release publishes a wake-up. A release with no such mark publishes
-- nothing: nobody waits for it (a waiter subscribes before the attempt that
-- marks, and one woken that takes the lock marks its own hold, for those
-- still waiting behind it). The hold keeps its ttl. With no hold in it
-- (an RWMutex's writer key while readers hold), the mark alone stays, and
-- the fence kept in it if any. `token`, `fence`, `flags`, `meta`: the key
-- as read_hold read it (all nil: read here).
local function waited_on(lock, token, fence, flags, meta)
  if token == nil then
    token, fence, flags, meta = read_hold(lock)
  end
  if flagged(flags, 'w') then
    return
  end
  if flagged(flags, 'o') then
    redis.call('HSET', lock, 'w', '1')
  else
    redis.call('SET', lock, hold_value(token or '', fence, flags .. 'w', meta), 'KEEPTTL')
  end
end

-- Ends the hold kept in `key` (fence `fence`) at server time `now` (us): the
-- key goes, unless the clock has not passed the fence yet (same microsecond,
-- or a clock step back): then only the fence stays, until the clock passes it.
-- `now` nil: the clock was not read, for a hold not marked ahead of it (no
-- flag `a`, see `hold`), whose fence is a TIME it has passed: the key goes.
local function end_hold(key, fence, now)
  if not now or fence < now then
    redis.call('DEL', key)
  else
    redis.call('SET', key, ' ' .. fence_text(fence) .. ' ', 'PX', math.floor((fence - now) / 1000) + 1)
  end
end
