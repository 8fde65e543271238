-- Put failed deliveries back into delivery, attempts reset. KEYS[1] the
-- failed list, KEYS[2] the schedule, KEYS[3] the retries by hand, KEYS[4]
-- their takes. ARGV: per delivery, its failed-list JSON (exactly as read),
-- its entry id, the event's JSON. One still in the list (not retried by
-- another call meanwhile) goes into the retries, due at once (score 0:
-- before every other due delivery). Returns how many.
local n = 0
for i = 1, #ARGV, 3 do
  if redis.call('LREM', KEYS[1], 1, ARGV[i]) == 1 then
    redis.call('HSET', KEYS[3], ARGV[i + 1], ARGV[i + 2])
    redis.call('HSET', KEYS[4], ARGV[i + 1], 0)
    redis.call('ZADD', KEYS[2], 0, 'h' .. ARGV[i + 1])
    n = n + 1
  end
end
return n
