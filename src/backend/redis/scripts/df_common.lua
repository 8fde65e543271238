-- The fields of a document-frequency hash counted at least ARGV[1] times,
-- and how many fields it holds with a count above 0.
-- KEYS[1] the hash. Returns {distinct, field, count, field, count, ...}.
local all = redis.call('HGETALL', KEYS[1])
local at = tonumber(ARGV[1])
local out = {0}
local distinct = 0
for i = 1, #all, 2 do
  local n = tonumber(all[i + 1]) or 0
  if n > 0 then distinct = distinct + 1 end
  if n >= at and n > 0 then
    out[#out + 1] = all[i]
    out[#out + 1] = n
  end
end
out[1] = distinct
return out
