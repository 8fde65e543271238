-- Where the document-frequency log ends: {the last entry's id ('0-0' when
-- none is left), the sequence number it has (or the sequence, when none)}.
-- KEYS[1] the log, KEYS[2] its sequence.
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local seq = redis.call('GET', KEYS[2]) or '0'
if #last == 0 then return {'0-0', seq} end
return {last[1][1], seq}
