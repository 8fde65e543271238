-- What one subscription is still owed: its group's pending entries, the
-- entries it has not read yet (its lag), and its retries by hand. KEYS[1]
-- the stream, KEYS[2] the retries by hand; ARGV[1] the group.
local n = redis.call('HLEN', KEYS[2])
if redis.call('EXISTS', KEYS[1]) == 0 then return n end
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local f = {}
  for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
  if f['name'] == ARGV[1] then
    local lag = f['lag']
    if not lag then
      -- Not known (entries deleted inside the unread range): count them
      -- (up to 100,000: a lower bound beyond).
      lag = #redis.call('XRANGE', KEYS[1], '(' .. f['last-delivered-id'], '+', 'COUNT', 100000)
    end
    return n + f['pending'] + lag
  end
end
return n
