-- The posting buckets of some fingerprints in hashes that share a slot,
-- each read only if it is small. KEYS: the posting hashes; ARGV[1] the most
-- bytes a bucket read in full may hold (common_fingerprint_docs members);
-- then key index (1-based), field, ... Returns, per field: '' (none), its
-- members, or (a common one, not read) its length in bytes as an integer.
local out = {}
local most = tonumber(ARGV[1])
for i = 2, #ARGV, 2 do
  local k = KEYS[tonumber(ARGV[i])]
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
