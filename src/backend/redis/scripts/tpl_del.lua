-- Delete a template and move the version if there was one. KEYS[1] the
-- templates hash, KEYS[2] the version; ARGV[1] the id. Returns 1 if deleted.
local gone = redis.call('HDEL', KEYS[1], ARGV[1])
if gone == 1 then redis.call('INCR', KEYS[2]) end
return gone
