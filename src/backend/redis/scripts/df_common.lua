-- The fields of some document-frequency hashes counted at least ARGV[1]
-- times, and how many fields they hold with a count above 0.
-- KEYS the hashes (of one slot). Returns {distinct, field, count, ...}.
local at = tonumber(ARGV[1])
local out = {0}
local distinct = 0
for _, k in ipairs(KEYS) do
  local all = redis.call('HGETALL', k)
  for i = 1, #all, 2 do
    local n = tonumber(all[i + 1]) or 0
    if n > 0 then distinct = distinct + 1 end
    if n >= at and n > 0 then
      out[#out + 1] = all[i]
      out[#out + 1] = n
    end
  end
end
out[1] = distinct
return out
