-- include:
-- refresh_compared.lua: the renewals of holds whose value their owner
-- knows exactly (src/primitive/compared.rs), in one call: the renewals
-- that fall due together on one server, or in one Cluster slot. Each is
-- what `SET key <now> IFEQ <known> PX ttl` does where the server has that
-- command: a hold whose value is the one its owner knows gets its ttl
-- again, and the value `now` when that is another (its fence recorded,
-- as lib/hold.lua's `renew_hold` records it). A hold with any other value
-- (a waiter marked it, another handle took it over, it expired; a key of
-- another type, which MGET reads as nil) is left as it is, and
-- refresh_batch.lua decides for it next. One MGET for them all, and one
-- PEXPIRE a hold: no value parsed, no helper.
-- KEYS: holds (lib/hold.lua), one a renewal, in the order of ARGV
-- ARGV: [holds (three items a hold, in order: its ttl in ms, the value
--       its owner knows, the value it gets: '' when the same)]
-- Returns one answer a hold, in order: 1 renewed, 0 when its value was
-- another (nothing of it changed).
local holds = ARGV

local values = redis.call('MGET', unpack(KEYS))
local answers = {}
for i = 1, #KEYS do
  local at = 3 * i - 2
  local ttl_ms, known, now = holds[at], holds[at + 1], holds[at + 2]
  if values[i] == known then
    if now == '' then
      redis.call('PEXPIRE', KEYS[i], ttl_ms)
    else
      redis.call('SET', KEYS[i], now, 'PX', ttl_ms)
    end
    answers[i] = 1
  else
    answers[i] = 0
  end
end
return answers
