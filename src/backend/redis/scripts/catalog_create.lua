
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then return {'exists', cur} end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return {'full'} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {'created'}
