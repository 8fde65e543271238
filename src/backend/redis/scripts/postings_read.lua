#!lua flags=no-writes,allow-cross-slot-keys
-- The posting buckets of some fingerprints in posting hashes of one slot,
-- or of several slots that one primary serves (one call a node, not one a
-- slot), each read only if it is small. KEYS: the hashes of one slot (the
-- call is routed by it); ARGV[1] the most bytes a bucket read in full may
-- hold (common_fingerprint_docs members); ARGV[2] how many hash names of
-- other slots follow; then those names (hash numbers go on after the
-- KEYS'); then hash number, field, ... Returns, per field: '' (none), its members,
-- or (a common one, not read) its length in bytes as an integer. A hash of
-- a slot this node does not serve (the slot map moved) fails the call:
-- "non local key".
local most = tonumber(ARGV[1])
local names = tonumber(ARGV[2])
local hashes = {}
for i = 1, #KEYS do
  hashes[i] = KEYS[i]
end
for i = 1, names do
  hashes[#KEYS + i] = ARGV[2 + i]
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
