-- Read the document-frequency log after an entry, with the sequence as it
-- is at that instant (a number the entries read stop short of is an entry
-- trimmed, or a stop: the reader counts again).
-- KEYS[1] the log, KEYS[2] its sequence; ARGV[1] the start ('(id'),
-- ARGV[2] how many entries at most. Returns {sequence, entries}.
local seq = redis.call('GET', KEYS[2]) or '0'
return {seq, redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])}
