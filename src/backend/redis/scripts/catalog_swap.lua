
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
if cjson.decode(cur)['incarnation'] ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 1
