
local cur = redis.call('GET', KEYS[1])
local out
if not cur then
  out = ''
elseif #ARGV[2] > 0 and string.sub(cur, 1, #ARGV[2]) == ARGV[2] then
  out = ARGV[3] .. string.sub(cur, #ARGV[2] + 1)
else
  local drop = {}
  for j = 1, #ARGV[4], 12 do drop[string.sub(ARGV[4], j, j + 11)] = true end
  local keep = {}
  for j = 1, #cur, 12 do
    local m = string.sub(cur, j, j + 11)
    if not drop[m] then keep[#keep + 1] = m end
  end
  out = table.concat(keep)
end
if #out == 0 then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
elseif #out < #cur then
  redis.call('SET', KEYS[1], out)
end
return 1
