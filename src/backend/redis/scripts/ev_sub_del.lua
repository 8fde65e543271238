-- Delete a webhook subscription with its consumer group and delivery
-- state, and move the version. KEYS as ev_sub_put.lua; ARGV[1] the id.
-- Returns 1 if there was one.
local gone = redis.call('HDEL', KEYS[1], ARGV[1])
if gone == 1 then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    redis.pcall('XGROUP', 'DESTROY', KEYS[3], ARGV[1])
  end
  redis.call('DEL', KEYS[4], KEYS[5], KEYS[6], KEYS[7])
  redis.call('INCR', KEYS[2])
end
return gone
