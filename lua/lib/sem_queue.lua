-- include: wake queue sem
-- lib/sem_queue.lua: a fair semaphore's queue served (lib/sem.lua's keys,
-- and a fair Lock's queue: lib/queue.lua).
-- Defines: sem_serve.

-- Hands every free permit to the next live waiters in line, each for its
-- own patience, named on `channel` in one grants message. Returns whether
-- anyone was let in.
local function sem_serve(holders, data, queue, alive, tags, us, channel)
  local rec = redis.call('HMGET', data, 'permits', 'fence')
  local permits, last = tonumber(rec[1]) or 0, tonumber(rec[2]) or 0
  local free = permits - redis.call('ZCARD', holders)
  local lines = {}
  while free > 0 do
    local head, attempt, patience = first_waiter(queue, alive, tags)
    if not head then
      break
    end
    leave_queue(alive, tags, head, queue)
    -- No metadata: the waiter's own, if any, comes with its claim (its next
    -- attempt), so one that gave none reads back none.
    local fence = sem_take(holders, data, head, false, patience, us, last)
    last = fence
    lines[#lines + 1] = grant_line(head, fence, attempt)
    free = free - 1
  end
  if #lines > 0 then
    publish_grants(channel, lines)
    return true
  end
  return false
end
