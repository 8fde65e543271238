-- Read document frequencies: the count of each field (4 bytes each,
-- concatenated) of KEYS[index], in order; 0 when absent (or below 0: see
-- df_add.lua).
-- KEYS the document-frequency hashes of one slot; ARGV: index, fields, ...
local out = {}
for i = 1, #ARGV, 2 do
  local k = KEYS[tonumber(ARGV[i])]
  local fields = ARGV[i + 1]
  for j = 1, #fields, 4 do
    local n = tonumber(redis.call('HGET', k, string.sub(fields, j, j + 3)) or '0') or 0
    if n < 0 then n = 0 end
    out[#out + 1] = n
  end
end
return out
