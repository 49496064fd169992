-- The wrk side of bench/run.ts (used when wrk is installed): an optional PATCH rotation and a JSON summary.
-- Usage: wrk -t1 -cN -dNs -s bench/wrk.lua -H 'Authorization: ...' URL [-- PATCH_PETS [PATCH_EVERY]]
-- PATCH_PETS > 0: PATCH /v1/inventory/{petId}, petId rotating over 1..PATCH_PETS; with PATCH_EVERY = k > 1, only
-- every k-th request is such a PATCH and the others are GETs of URL (a mix: 1 write in k requests).
-- No response() function on purpose: defining one makes wrk parse and keep every body, which would make the
-- load generator, not the server, the limit on large responses. Status errors are therefore wrk's own count,
-- responses with a status above 399.

local requests = {}
local counter = 0
local patches = 0

function init (args)
  local pets = tonumber(args[1] or '0')
  local every = tonumber(args[2] or '1')
  if pets > 0 then
    -- Prebuilt, as wrk's guide advises: building a request per call costs the generator more than a lookup.
    local headers = { ['Content-Type'] = 'application/json' }
    for name, value in pairs(wrk.headers) do headers[name] = value end
    for i = 1, pets do
      requests[i] = wrk.format('PATCH', '/v1/inventory/' .. i, headers, '{"quantity":' .. (i % 1000) .. '}')
    end
    if every > 1 then
      local get = wrk.format('GET')
      request = function ()
        counter = counter + 1
        if counter % every ~= 0 then return get end
        patches = patches + 1
        return requests[(patches % pets) + 1]
      end
    else
      -- Defined only here: without a request() function wrk sends its one static request with no Lua call.
      request = function ()
        counter = counter + 1
        return requests[(counter % pets) + 1]
      end
    end
  end
end

function done (summary, latency, _)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"durationUs":%d,"status":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p50Us":%d,"p99Us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
