-- include: fence hold wake queue
-- lib/handover.lua: a release hands a free fair Lock (or a fair RWMutex's
-- writer hold) straight to the next waiter, who holds from the message on.
-- Defines: hand_over, serve_head.

-- Gives `lock` (last fence `last`) to the waiter `token` at server time `us`:
-- it holds for its own `patience` ms unless it renews, and is told on
-- `channel` with a grant line (lib/wake.lua). The grant is valid only for
-- that attempt: the waiter measures its lease from when it sent that
-- attempt, which ran before this script. `waited`: others still queue
-- behind it, so the hold is marked waited on (lib/hold.lua).
local function hand_over(lock, token, attempt, patience, last, us, channel, waited)
  local fence = next_fence(last, us)
  -- The waiter's metadata, if any, comes with its next attempt; the marks of a
  -- waiter and of a fence ahead of the clock (lib/hold.lua) are this hold's own.
  hold(lock, token, false, patience, fence, waited, fence > us)
  publish_grants(channel, {grant_line(token, fence, attempt)})
end

-- Fair Lock: `lock` is free; the first live waiter of `queue` gets it,
-- marked waited on when others queue behind it. Returns whether one did.
local function serve_head(lock, queue, alive, tags, last, us, channel)
  local head, attempt, patience = first_waiter(queue, alive, tags)
  if not head then
    return false
  end
  leave_queue(alive, tags, head, queue)
  hand_over(lock, head, attempt, patience, last, us, channel, redis.call('EXISTS', queue) == 1)
  return true
end
