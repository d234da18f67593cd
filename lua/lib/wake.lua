-- include: fence
-- lib/wake.lua: what releases publish, for waiters to wake on
-- (src/wakeups.rs). Needs PUBLISH, the line the assembly puts first in
-- every script: 'PUBLISH' on one node, 'SPUBLISH' (sharded pub/sub) in a
-- Cluster.
-- Defines: publish, grant_line, publish_grants.
--
-- The message on a wake-up channel is one of:
--   ''     something was released: the oldest waiter (or every reader at
--          the head) wakes and tries again;
--   grants one line per new holder a release handed the lock (or a permit,
--          or a reader's place) to, lines joined by '\n', each
--              <token> <fence> <attempt>
--          token: the waiter's token (no space in it); fence: its fence in
--          decimal (fence_text), 0 for a reader; attempt: the waiter's
--          attempt number the grant is valid for (from its tag, see
--          lib/queue.lua). Parsed by src/handover.rs (`Grant`).

-- Announces on `channel` (under the keys' hash tag, so in their slot).
local function publish(channel, message)
  redis.call(PUBLISH, channel, message)
end

-- One line of a grants message: `token` is handed fence `fence` (a number)
-- for its attempt `attempt`.
local function grant_line(token, fence, attempt)
  return token .. ' ' .. fence_text(fence) .. ' ' .. attempt
end

-- Publishes the grants `lines` (at least one) on `channel`.
local function publish_grants(channel, lines)
  publish(channel, table.concat(lines, '\n'))
end
