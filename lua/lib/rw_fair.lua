-- include: hold wake queue leases handover
-- lib/rw_fair.lua: who a fair RWMutex lets in next.
-- Defines: rw_serve.

-- When no writer holds, lets in whoever is next: every reader queued before
-- the first queued writer (each for its own patience, named on `channel`
-- in one grants message, fence 0), or, failing those and once no reader is
-- left, the first queued writer (hand_over). Returns whether anyone was let in.
local function rw_serve(writer, readers, qr, qw, alive, tags, us, channel)
  local holder_token, last = read_hold(writer)
  if holder_token then
    return false
  end
  local now = math.floor(us / 1000)
  local w, w_attempt, w_patience = first_waiter(qw, alive, tags, qr)
  local bound = '+inf'
  if w then
    bound = '(' .. redis.call('ZSCORE', qw, w)
  end
  local lines = {}
  for _, reader in ipairs(redis.call('ZRANGEBYSCORE', qr, '-inf', bound)) do
    local attempt, patience = parse_tag(redis.call('HGET', tags, reader))
    leave_queue(alive, tags, reader, qr, qw)
    if attempt then
      redis.call('ZADD', readers, 'GT', now + patience, reader)
      lines[#lines + 1] = grant_line(reader, 0, attempt)
    end
  end
  if #lines > 0 then
    expire_with_last_reader(readers, now)
    publish_grants(channel, lines)
    return true
  end
  if w and redis.call('ZCARD', readers) == 0 then
    leave_queue(alive, tags, w, qr, qw)
    hand_over(writer, w, w_attempt, w_patience, last, us, channel)
    return true
  end
  return false
end
