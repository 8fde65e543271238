
local function u64(s, at)
  local v = 0
  for i = at + 7, at, -1 do v = v * 256 + string.byte(s, i) end
  return v
end
if KEYS[3] then
  if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {'expired'} end
end
local old = redis.call('GET', KEYS[1])
local outcome = 'created'
if old then
  local n = string.byte(old, 22) + 256 * string.byte(old, 23)
  if string.sub(old, 24, 23 + n) ~= ARGV[5] then return {'collision'} end
  local exp = u64(old, 14)
  local ttl = tonumber(ARGV[4])
  if exp == 0 and ttl > 0 then exp = u64(old, 6) + ttl end
  local live = exp == 0 or tonumber(ARGV[3]) < exp
  if live and ARGV[2] == 'c' then return {'exists'} end
  if live then outcome = 'replaced' end
end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[6] ~= '' then
  redis.call('SET', KEYS[2], ARGV[6])
else
  redis.call('DEL', KEYS[2])
end
if KEYS[3] then redis.call('DEL', KEYS[3]) end
if old then return {outcome, old} end
return {outcome}
