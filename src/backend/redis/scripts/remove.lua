
for i = 1, #ARGV, 2 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if cur then
    local keep = {}
    for j = 1, #cur, 12 do
      local m = string.sub(cur, j, j + 11)
      if m ~= ARGV[i + 1] then keep[#keep + 1] = m end
    end
    if #keep == 0 then
      redis.call('HDEL', KEYS[1], ARGV[i])
    else
      redis.call('HSET', KEYS[1], ARGV[i], table.concat(keep))
    end
  end
end
return 1
