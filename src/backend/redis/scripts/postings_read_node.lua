#!lua flags=no-writes,allow-cross-slot-keys
-- postings_read.lua over posting hashes of several slots that one primary
-- serves (one call a node, not one a slot). KEYS[1] one of the hashes (the
-- call is routed by its slot); ARGV[1] the most bytes a bucket read in full
-- may hold; ARGV[2] how many hash names follow; then the names (hash 1 is
-- KEYS[1], hash i + 1 is the i-th name); then hash number, field, ...
-- Returns, per field: '' (none), its members, or (a common one, not read)
-- its length in bytes as an integer. A hash of a slot this node does not
-- serve (the slot map moved) fails the call: "non local key".
local most = tonumber(ARGV[1])
local names = tonumber(ARGV[2])
local hashes = { KEYS[1] }
for i = 1, names do
  hashes[i + 1] = ARGV[2 + i]
end
local out = {}
for i = 3 + names, #ARGV, 2 do
  local k = hashes[tonumber(ARGV[i])]
  local n = redis.call('HSTRLEN', k, ARGV[i + 1])
  if n == 0 then
    out[#out + 1] = ''
  elseif n > most then
    out[#out + 1] = n
  else
    out[#out + 1] = redis.call('HGET', k, ARGV[i + 1])
  end
end
return out
