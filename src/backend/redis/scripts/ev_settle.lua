-- Settle one take of a delivery. KEYS[1] the stream, KEYS[2] the
-- schedule, KEYS[3] the retries by hand, KEYS[4] their takes, KEYS[5] the
-- failed list. ARGV[1] the group, ARGV[2] the member, ARGV[3] the take
-- number, ARGV[4] the consumer that took it, ARGV[5] the outcome ('d'
-- delivered, 'r' retry, 'f' failed), ARGV[6] when to retry (ms), ARGV[7]
-- the failed delivery's JSON, ARGV[8] the failed list's bound.
-- A take another node has taken over since (its lease ended) is not this
-- node's to settle: nothing changes. Returns {applied, failed dropped}.
local m = ARGV[2]
if string.sub(m, 1, 1) == 'h' then
  local id = string.sub(m, 2)
  local n = redis.call('HGET', KEYS[4], id)
  if (not n) or n ~= ARGV[3] then return {0, 0} end
  if ARGV[5] == 'r' then
    redis.call('ZADD', KEYS[2], ARGV[6], m)
    return {1, 0}
  end
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[4], id)
else
  local p = redis.pcall('XPENDING', KEYS[1], ARGV[1], m, m, 1)
  if p.err or #p == 0 then return {0, 0} end
  if p[1][2] ~= ARGV[4] or tostring(p[1][4]) ~= ARGV[3] then return {0, 0} end
  if ARGV[5] == 'r' then
    redis.call('ZADD', KEYS[2], ARGV[6], m)
    return {1, 0}
  end
  redis.call('XACK', KEYS[1], ARGV[1], m)
end
redis.call('ZREM', KEYS[2], m)
local dropped = 0
if ARGV[5] == 'f' then
  local bound = tonumber(ARGV[8])
  local len = redis.call('LPUSH', KEYS[5], ARGV[7])
  if len > bound then
    redis.call('LTRIM', KEYS[5], 0, bound - 1)
    dropped = len - bound
  end
end
return {1, dropped}
