-- The templates and their version, read together.
-- KEYS[1] the templates hash, KEYS[2] the version. Returns {version, id, json, ...}.
local out = {tonumber(redis.call('GET', KEYS[2]) or '0')}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all do out[#out + 1] = all[i] end
return out
