-- Read document frequencies: the count of each (key index, field), 0 when
-- absent (or below 0: see df_add.lua).
-- KEYS the document-frequency hashes of one slot; ARGV: index, field, ...
local out = {}
for i = 1, #ARGV, 2 do
  local v = redis.call('HGET', KEYS[tonumber(ARGV[i])], ARGV[i + 1])
  local n = tonumber(v or '0') or 0
  if n < 0 then n = 0 end
  out[#out + 1] = n
end
return out
