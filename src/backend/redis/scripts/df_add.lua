-- Move document frequencies: for each (key index, delta, fields) add delta
-- to each field (4 bytes each, concatenated) of KEYS[index]; a field that
-- reaches 0 goes (one left below 0 by a decrement that overtook its
-- increment stays until that lands).
-- KEYS the document-frequency hashes of one slot; ARGV: index, delta, fields, ...
for i = 1, #ARGV, 3 do
  local k = KEYS[tonumber(ARGV[i])]
  local d = tonumber(ARGV[i + 1])
  local fields = ARGV[i + 2]
  for j = 1, #fields, 4 do
    local f = string.sub(fields, j, j + 3)
    if redis.call('HINCRBY', k, f, d) == 0 then redis.call('HDEL', k, f) end
  end
end
return 1
