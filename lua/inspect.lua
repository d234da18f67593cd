-- include: hold
-- inspect.lua: who holds each lock in KEYS.
-- KEYS: holds (lib/hold.lua)
-- ARGV: none
-- Returns one entry per key: {token, meta, fence, pttl} when held, {} when free.
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = holder(key)
end
return out
