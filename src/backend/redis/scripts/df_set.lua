-- Write counted document frequencies (a recount): with ARGV[1] = '1' every
-- hash of KEYS is deleted first; then each (key index, field, count) is set.
-- KEYS every document-frequency hash of one slot; ARGV[1] the reset flag,
-- ARGV[2..]: index, field, count, ...
if ARGV[1] == '1' then
  for _, k in ipairs(KEYS) do redis.call('DEL', k) end
end
for i = 2, #ARGV, 3 do
  redis.call('HSET', KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
return 1
