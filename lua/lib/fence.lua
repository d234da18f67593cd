-- include:
-- lib/fence.lua: the fence (fencing token) of a new hold, and how it is written.
-- Defines: next_fence, fence_text.
--
-- The one formula (docs/design.md, "Fencing tokens"):
--
--   fence = max(server time in microseconds, last fence on record + 1)
--
-- `us`: the server's clock (lib/clock.lua's now_us, read by the caller);
-- `last`: the highest fence still on record for the name (its hold's
-- fence, a fence-only remainder, a semaphore's last fence, a quorum's fence
-- record), 0 when there is none. Fences stay below 2^53, exact as doubles.
local function next_fence(last, us)
  return math.max(us, last + 1)
end

-- A fence as Redis stores it and as hand-over messages carry it: an integer
-- in decimal, no exponent. '%d' formats a C long (64 bits on the servers
-- Redis and Valkey build for), exact below 2^53; '%.0f' gives the same text,
-- but its floating-point formatting costs a script about 3 us more.
local function fence_text(fence)
  return string.format('%d', fence)
end
