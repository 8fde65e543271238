-- Every review decision of a collection with the version they are at
-- (issue 46), read at once. KEYS as rv_put.lua. Returns {version, HGETALL}.
return {tonumber(redis.call('GET', KEYS[2]) or '0'), redis.call('HGETALL', KEYS[1])}
