-- Store a webhook subscription and move the version. KEYS[1] the
-- subscriptions hash, KEYS[2] the version, KEYS[3] the stream, KEYS[4..7]
-- the subscription's schedule, retries, retry takes and failed list;
-- ARGV[1] the id, ARGV[2] its JSON, ARGV[3] the most subscriptions the
-- collection may have. A new subscription gets a consumer group at '$'
-- (only events appended from now on) and no delivery state. Returns 1 if
-- new, 0 if replaced, -1 if new and the collection already has the most
-- (nothing stored: the count and the store are one step, whichever node).
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0
    and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return -1
end
local created = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if created == 1 then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    redis.pcall('XGROUP', 'DESTROY', KEYS[3], ARGV[1])
  end
  redis.call('XGROUP', 'CREATE', KEYS[3], ARGV[1], '$', 'MKSTREAM')
  redis.call('DEL', KEYS[4], KEYS[5], KEYS[6], KEYS[7])
end
redis.call('INCR', KEYS[2])
return created
