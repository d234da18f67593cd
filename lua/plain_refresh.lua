-- include:
-- plain_refresh.lua: renew or extend a plain hold (a string key whose value
-- is its owner's token; see plain_release.lua), only if `token` holds it.
-- KEYS: [hold]
-- ARGV: [token, ms, how ('set': the expiry becomes ms from now;
--       'add': ms are added to the time left, redis-py's extend; 'keep':
--       a hold without expiry, only checked, never given one)]
-- Returns {1, pttl after} when renewed (pttl -1 for 'keep'), {0, -2} when
-- `token` does not hold it, {2, -1} when it holds it but the key has no
-- expiry and 'set' or 'add' was asked (nothing changed: a hold taken
-- without expiry is not given one).
local hold = KEYS[1]
local token, ms, how = ARGV[1], tonumber(ARGV[2]), ARGV[3]

if redis.call('GET', hold) ~= token then
  return {0, -2}
end
local pttl = redis.call('PTTL', hold)
if how == 'keep' then
  return {1, pttl}
end
if pttl < 0 then
  return {2, -1}
end
if how == 'add' then
  ms = ms + pttl
end
redis.call('PEXPIRE', hold, ms)
return {1, ms}
