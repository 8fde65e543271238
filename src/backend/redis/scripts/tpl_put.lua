-- Store a template and move the version. KEYS[1] the templates hash,
-- KEYS[2] the version; ARGV[1] the id, ARGV[2] its JSON. Returns 1 if new.
local created = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCR', KEYS[2])
return created
