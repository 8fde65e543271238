-- Append events to a collection's log, in order. KEYS[1] the stream; ARGV
-- the events: id, draft JSON, id, draft JSON, ... Returns their entry ids.
local out = {}
for i = 1, #ARGV, 2 do
  out[#out + 1] = redis.call('XADD', KEYS[1], '*', 'id', ARGV[i], 'e', ARGV[i + 1])
end
return out
