-- Trim a collection's log. KEYS[1] the stream. ARGV[1] the time cutoff
-- (ms: older entries go), ARGV[2] the most entries kept, ARGV[3] the most
-- dropped by count in one call. Never past an entry some consumer group
-- still owes: its oldest pending entry, or the first after its
-- last-delivered id (not yet read). Returns how many entries went.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  return {tonumber(ms), tonumber(seq)}
end
local function less(a, b)
  return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
end
local target = {tonumber(ARGV[1]), 0}
local len = redis.call('XLEN', KEYS[1])
local keep = tonumber(ARGV[2])
if len > keep then
  local excess = math.min(len - keep, tonumber(ARGV[3]))
  local r = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', excess + 1)
  local bound
  if #r > excess then
    bound = parse(r[#r][1])
  else
    local last = parse(r[#r][1])
    bound = {last[1], last[2] + 1}
  end
  if less(target, bound) then target = bound end
end
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local f = {}
  for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
  local last = parse(f['last-delivered-id'])
  local owed = {last[1], last[2] + 1}
  local p = redis.call('XPENDING', KEYS[1], f['name'])
  if p[1] > 0 then
    local oldest = parse(p[2])
    if less(oldest, owed) then owed = oldest end
  end
  if less(owed, target) then target = owed end
end
return redis.call('XTRIM', KEYS[1], 'MINID', string.format('%d-%d', target[1], target[2]))
