-- Append one batch of document-frequency changes to the collection's log,
-- numbered by the log's sequence, and trim entries older than the window
-- (by the server's clock, as the entry ids are).
-- KEYS[1] the log (a stream), KEYS[2] its sequence; ARGV[1] the window (ms),
-- ARGV[2] the batch (docs/redis-layout.md, "Document frequency").
-- Returns the entry's sequence number.
local seq = redis.call('INCR', KEYS[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local min = now - tonumber(ARGV[1])
if min < 0 then min = 0 end
redis.call('XADD', KEYS[1], 'MINID', '~', min, '*', 's', seq, 'd', ARGV[2])
return seq
