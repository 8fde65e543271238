-- Append members to posting buckets of hashes that share a slot.
-- KEYS: the posting hashes; ARGV: key index (1-based), field, member, ...
for i = 1, #ARGV, 3 do
  local k = KEYS[tonumber(ARGV[i])]
  local cur = redis.call('HGET', k, ARGV[i + 1])
  if cur then
    redis.call('HSET', k, ARGV[i + 1], cur .. ARGV[i + 2])
  else
    redis.call('HSET', k, ARGV[i + 1], ARGV[i + 2])
  end
end
return 1
