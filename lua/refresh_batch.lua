-- include: hold
-- refresh_batch.lua: refresh.lua for several holds at once (the renewals
-- that fall due together on one server, or in one Cluster slot): each
-- hold's keys are pushed only if its owner holds them all; a hold
-- no longer its owner's changes nothing, and the others are renewed all
-- the same.
-- KEYS: the keys of every hold (lib/hold.lua), one hold's after another's, in the
--       order of ARGV
-- ARGV: [holds (three items a hold, in order: how many of KEYS are its
--       keys, its token, its ttl in ms)]
-- Returns one answer a hold, in order: 1 renewed, 0 when any of its keys
-- is no longer its owner's (nothing of it changed).
local holds = ARGV

-- A hold of one key (every hold but a multi-lock's) is looked at through
-- one table, filled again for each: no table made a hold.
local answers, first, one = {}, 1, {}
for i = 1, #holds, 3 do
  local count, token, ttl_ms = tonumber(holds[i]), holds[i + 1], holds[i + 2]
  local keys = one
  if count == 1 then
    one[1] = KEYS[first]
  else
    keys = {unpack(KEYS, first, first + count - 1)}
  end
  first = first + count
  if holds_all(keys, token) then
    for j = 1, count do
      redis.call('PEXPIRE', keys[j], ttl_ms)
    end
    answers[#answers + 1] = 1
  else
    answers[#answers + 1] = 0
  end
end
return answers
