-- Delete a review decision (issue 46) and move the version. KEYS as
-- rv_put.lua; ARGV[1] the pair's field. Returns {the deleted JSON or nil,
-- the version} (unmoved when there was none).
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then
  return {false, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
redis.call('HDEL', KEYS[1], ARGV[1])
local v = redis.call('INCR', KEYS[2])
return {old, v}
