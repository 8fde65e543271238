-- Store a review decision (issue 46) and move the version. KEYS[1] the
-- decisions hash, KEYS[2] its version; ARGV[1] the pair's field, ARGV[2]
-- and ARGV[3] the decision's JSON before and after its revision number.
-- The revision is 1 for a new pair, one more than the stored one's
-- otherwise (read here, so two nodes editing a pair at once count both).
-- Returns {the previous JSON or nil, the new version}.
local old = redis.call('HGET', KEYS[1], ARGV[1])
local rev = 1
if old then
  rev = (tonumber(string.match(old, '"revision":(%d+)')) or 0) + 1
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. rev .. ARGV[3])
local v = redis.call('INCR', KEYS[2])
return {old, v}
