-- Take up to ARGV[4] deliveries due to one subscription now.
-- KEYS[1] the stream, KEYS[2] the subscription's schedule (member: entry
-- id, or 'h' .. entry id for a retry by hand; score: when it is due
-- again), KEYS[3] its retries by hand (entry id -> event JSON), KEYS[4]
-- their takes (entry id -> n). ARGV[1] the group (the subscription's id),
-- ARGV[2] this node's consumer name, ARGV[3] now (ms), ARGV[4] the most
-- to take, ARGV[5] backoff base (ms), ARGV[6] backoff cap (ms), ARGV[7]
-- a request's timeout (ms).
--
-- Every take is scheduled again at the end of its lease (backoff of its
-- take number + the timeout): unless settled by then, any node takes it
-- again, with the same event. Due entries first (retries by hand, scored
-- 0, before the others), then new entries (XREADGROUP '>').
-- Returns {kind, member, take number, a, b, previous consumer} per take:
-- kind 's' (a stream entry: a = event id, b = draft JSON) or 'h' (a retry
-- by hand: a = the event's JSON, b = '').
local now, max = tonumber(ARGV[3]), tonumber(ARGV[4])
local base, cap, timeout = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local out = {}
if redis.call('EXISTS', KEYS[1]) == 0 then return out end
local summary = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if type(summary) == 'table' and summary.err then return out end -- no group: deleted

local function lease(n)
  local b = base * 2 ^ math.min(n - 1, 40)
  if b > cap then b = cap end
  return math.floor(now + b + timeout)
end
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return ''
end

for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[3], 'LIMIT', 0, max)) do
  if string.sub(m, 1, 1) == 'h' then
    local id = string.sub(m, 2)
    local ev = redis.call('HGET', KEYS[3], id)
    if ev then
      local n = redis.call('HINCRBY', KEYS[4], id, 1)
      redis.call('ZADD', KEYS[2], lease(n), m)
      out[#out + 1] = {'h', m, n, ev, '', ''}
    else
      redis.call('ZREM', KEYS[2], m)
    end
  else
    local prev = redis.call('XPENDING', KEYS[1], ARGV[1], m, m, 1)
    local claimed = {}
    if #prev == 1 then
      claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, m)
    end
    if #claimed == 1 and claimed[1] then
      local n = prev[1][4] + 1
      redis.call('ZADD', KEYS[2], lease(n), m)
      local fields = claimed[1][2]
      out[#out + 1] = {'s', m, n, field(fields, 'id'), field(fields, 'e'), prev[1][2]}
    else
      -- Settled meanwhile (or its entry gone): nothing owed.
      redis.call('ZREM', KEYS[2], m)
    end
  end
end

local want = max - #out
if want > 0 then
  local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', want, 'STREAMS', KEYS[1], '>')
  if r then
    for _, e in ipairs(r[1][2]) do
      redis.call('ZADD', KEYS[2], lease(1), e[1])
      out[#out + 1] = {'s', e[1], 1, field(e[2], 'id'), field(e[2], 'e'), ''}
    end
  end
end
return out
