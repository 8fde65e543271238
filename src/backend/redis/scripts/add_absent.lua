-- Append members to fields of one bucket hash unless the field already
-- holds them (a backfill run twice, or by two nodes, adds each once).
-- KEYS[1] the hash; ARGV: field, member, field, member, ...
local added = 0
for i = 1, #ARGV, 2 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if not cur then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    added = added + 1
  else
    local found = false
    for j = 1, #cur, 12 do
      if string.sub(cur, j, j + 11) == ARGV[i + 1] then found = true; break end
    end
    if not found then
      redis.call('HSET', KEYS[1], ARGV[i], cur .. ARGV[i + 1])
      added = added + 1
    end
  end
end
return added
