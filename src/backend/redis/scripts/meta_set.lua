-- Set one `name=value` of a collection's layout string (`a=1;b=2`),
-- adding it if absent; nothing if the layout key is missing.
-- KEYS[1] the layout key; ARGV[1] the name, ARGV[2] the value.
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local out = {}
local found = false
local head = ARGV[1] .. '='
for kv in string.gmatch(cur, '[^;]+') do
  if string.sub(kv, 1, #head) == head then
    out[#out + 1] = head .. ARGV[2]
    found = true
  else
    out[#out + 1] = kv
  end
end
if not found then out[#out + 1] = head .. ARGV[2] end
redis.call('SET', KEYS[1], table.concat(out, ';'))
return 1
