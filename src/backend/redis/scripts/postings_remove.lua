-- Remove exactly these members from posting buckets of hashes that share a
-- slot (a field left empty goes). KEYS: the posting hashes; ARGV: key index
-- (1-based), field, member, ...
for i = 1, #ARGV, 3 do
  local k = KEYS[tonumber(ARGV[i])]
  local cur = redis.call('HGET', k, ARGV[i + 1])
  if cur then
    local keep = {}
    for j = 1, #cur, 12 do
      local m = string.sub(cur, j, j + 11)
      if m ~= ARGV[i + 2] then keep[#keep + 1] = m end
    end
    if #keep == 0 then
      redis.call('HDEL', k, ARGV[i + 1])
    else
      redis.call('HSET', k, ARGV[i + 1], table.concat(keep))
    end
  end
end
return 1
