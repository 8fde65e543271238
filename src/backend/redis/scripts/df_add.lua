-- Move document frequencies: for each (key index, field, delta) add delta
-- to the field of KEYS[index]; a field that reaches 0 goes (one left below
-- 0 by a decrement that overtook its increment stays until that lands).
-- KEYS the document-frequency hashes of one slot; ARGV: index, field, delta, ...
for i = 1, #ARGV, 3 do
  local k = KEYS[tonumber(ARGV[i])]
  local n = redis.call('HINCRBY', k, ARGV[i + 1], tonumber(ARGV[i + 2]))
  if n == 0 then redis.call('HDEL', k, ARGV[i + 1]) end
end
return 1
