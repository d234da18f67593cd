-- include:
-- lib/parts.lua: the operator's tools (describe.lua, force_release.lua) read
-- every kind of primitive alike: `keys` are every part of one name and
-- `roles[i]` is `keys[i]`'s '<kind> <role>' (from the key layout table,
-- src/keys/layout.rs).
-- Defines: parts_by_kind, present.

-- Returns kind -> {role -> key}, and the kinds in the order of their first key.
local function parts_by_kind(keys, roles)
  local kinds, order = {}, {}
  for i, key in ipairs(keys) do
    local kind, role = string.match(roles[i], '^(%S+) (%S+)$')
    if not kinds[kind] then
      kinds[kind] = {}
      order[#order + 1] = kind
    end
    kinds[kind][role] = key
  end
  return kinds, order
end

-- Whether `key` is stored, asked with PTTL (-2: no such key) so that reading
-- a name needs no sorted-set command where none is stored: a user allowed
-- only a Lock's commands (docs/reliability.md, ACL) can inspect and
-- force-release a Lock.
local function present(key)
  return key ~= nil and redis.call('PTTL', key) ~= -2
end
