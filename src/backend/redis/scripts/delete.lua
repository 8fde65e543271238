
local old = redis.call('GET', KEYS[1])
if not old then return false end
local n = string.byte(old, 22) + 256 * string.byte(old, 23)
if string.sub(old, 24, 23 + n) ~= ARGV[1] then return false end
if ARGV[2] ~= '' and string.sub(old, 2, 5) ~= ARGV[2] then return false end
redis.call('DEL', KEYS[1], KEYS[2])
return old
