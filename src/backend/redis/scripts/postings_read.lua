-- The posting buckets of some fingerprints in one hash, each read only if
-- it is small. KEYS[1] the posting hash; ARGV[1] the most bytes a bucket
-- read in full may hold (common_fingerprint_docs members); ARGV[2..] the
-- fields. Returns, per field: '' (none), its members, or (a common one,
-- not read) its length in bytes as an integer.
local out = {}
local most = tonumber(ARGV[1])
for i = 2, #ARGV do
  local n = redis.call('HSTRLEN', KEYS[1], ARGV[i])
  if n == 0 then
    out[#out + 1] = ''
  elseif n > most then
    out[#out + 1] = n
  else
    out[#out + 1] = redis.call('HGET', KEYS[1], ARGV[i])
  end
end
return out
