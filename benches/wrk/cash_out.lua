-- wrk script: durable cash-outs on one account, each with a new externalId.
-- Usage: wrk -t2 -c64 -d20s --latency -s cash_out.lua URL -- TOKEN KEY DOCUMENT
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  token, key, doc = args[1], args[2], args[3]
  prefix = string.format("wrk-%d-%d-", os.time(), id)
  counter = 0
  headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. token }
end

function request()
  counter = counter + 1
  local body = string.format(
    '{"value": 0.01, "externalId": "%s%d", "details": {"key": "%s", "keyType": "EMAIL", "name": "Bench", "document": "%s"}}',
    prefix, counter, key, doc)
  return wrk.format("POST", "/api/pix/cash-out", headers, body)
end
