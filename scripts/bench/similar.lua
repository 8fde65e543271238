-- wrk script: GET /similar?id=<random existing id>, or a fixed path.
--
--   wrk ... -s similar.lua URL -- IDS_FILE [SEED]    random ids from IDS_FILE
--   wrk ... -s similar.lua URL -- --path /healthz    the same loop on one path
--
-- IDS_FILE has one id per line, already percent-encoded for a query string
-- (scripts/bench/ids.py writes it). Each wrk thread loads the whole file and
-- draws ids uniformly with its own seed, so runs are repeatable in the ids
-- they ask for (not in timing). done() prints one JSON line, prefixed
-- "WRK_JSON ", with the request count, errors and latency percentiles in
-- microseconds, p99.9 included (wrk's own --latency table stops at p99).

local ids = nil
local path = nil
local counter = 0

-- Runs in the main Lua state; `thread_no` becomes a global in each thread's.
function setup(thread)
    counter = counter + 1
    thread:set("thread_no", counter)
end

function init(args)
    if args[1] == "--path" then
        path = args[2]
        return
    end
    local file = args[1]
    if not file then
        error("usage: -s similar.lua URL -- IDS_FILE [SEED] | --path PATH")
    end
    ids = {}
    for line in io.lines(file) do
        if #line > 0 then
            ids[#ids + 1] = "/similar?id=" .. line
        end
    end
    if #ids == 0 then
        error("no ids in " .. file)
    end
    math.randomseed((tonumber(args[2]) or 1) * 1000 + (_G.thread_no or 0))
end

function request()
    if path then
        return wrk.format("GET", path)
    end
    return wrk.format("GET", ids[math.random(#ids)])
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
