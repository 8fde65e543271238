-- wrk script: GET /similar?id=<existing id, in a shuffled order>, or a fixed path.
--
--   wrk ... -s similar.lua URL -- IDS_FILE [SEED]    ids from IDS_FILE
--   wrk ... -s similar.lua URL -- --path /healthz    the same loop on one path
--
-- IDS_FILE has one id per line, already percent-encoded for a query string
-- (scripts/bench/ids.py writes it). Each wrk thread loads the whole file,
-- shuffles it with its own seed and formats every request before the clock
-- starts (wrk calls init() before it starts timing); request() then hands out
-- the next one, wrapping at the end. So the client's work per request is the
-- same on both routes: one table read, in order. Drawing a random id and
-- formatting its request on every call (this script until round 10) cost wrk
-- 13.7 µs of CPU a /similar request against 11.0 for /healthz (11.0 and 10.0
-- now), on the two cores it shares with the server; docs/benchmarks.md,
-- round 10. Runs are repeatable in the ids
-- they ask for (not in timing); within a run each id is asked at most once
-- until every id has been. done() prints one JSON line, prefixed "WRK_JSON ",
-- with the request count, errors and latency percentiles in microseconds,
-- p99.9 included (wrk's own --latency table stops at p99).

local reqs = nil
local n = 0
local next_i = 0
local counter = 0

-- Runs in the main Lua state; `thread_no` becomes a global in each thread's.
function setup(thread)
    counter = counter + 1
    thread:set("thread_no", counter)
end

function init(args)
    reqs = {}
    if args[1] == "--path" then
        reqs[1] = wrk.format("GET", args[2])
        n = 1
        return
    end
    local file = args[1]
    if not file then
        error("usage: -s similar.lua URL -- IDS_FILE [SEED] | --path PATH")
    end
    local ids = {}
    for line in io.lines(file) do
        if #line > 0 then
            ids[#ids + 1] = line
        end
    end
    if #ids == 0 then
        error("no ids in " .. file)
    end
    math.randomseed((tonumber(args[2]) or 1) * 1000 + (_G.thread_no or 0))
    for k = #ids, 2, -1 do -- Fisher-Yates
        local j = math.random(k)
        ids[k], ids[j] = ids[j], ids[k]
    end
    for k = 1, #ids do
        reqs[k] = wrk.format("GET", "/similar?id=" .. ids[k])
    end
    n = #reqs
end

function request()
    next_i = next_i + 1
    if next_i > n then
        next_i = 1
    end
    return reqs[next_i]
end

function done(summary, latency, requests)
    local e = summary.errors
    local pct = function(p) return latency:percentile(p) end
    io.write(string.format(
        'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
        '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
        '"latency_us":{"mean":%.1f,"stdev":%.1f,"p50":%d,"p90":%d,"p99":%d,"p99_9":%d,"max":%d}}\n',
        summary.requests, summary.duration, summary.bytes,
        e.connect, e.read, e.write, e.status, e.timeout,
        latency.mean, latency.stdev, pct(50), pct(90), pct(99), pct(99.9), latency.max))
end
