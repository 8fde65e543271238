-- Append members to posting buckets of hashes that share a slot unless the
-- field already holds them (a backfill run twice, or by two nodes, adds
-- each once). KEYS: the posting hashes; ARGV: key index (1-based), field,
-- member, ...
local added = 0
for i = 1, #ARGV, 3 do
  local k = KEYS[tonumber(ARGV[i])]
  local cur = redis.call('HGET', k, ARGV[i + 1])
  if not cur then
    redis.call('HSET', k, ARGV[i + 1], ARGV[i + 2])
    added = added + 1
  else
    local found = false
    for j = 1, #cur, 12 do
      if string.sub(cur, j, j + 11) == ARGV[i + 2] then found = true; break end
    end
    if not found then
      redis.call('HSET', k, ARGV[i + 1], cur .. ARGV[i + 2])
      added = added + 1
    end
  end
end
return added
