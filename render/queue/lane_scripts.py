"""The Lua scripts of the hand-off, each one atomic step on Redis; docs/architecture.md ("The hand-off") says
what they do together and names every key inside a lane, and render.queue.lanes calls them.

Keys are derived inside the scripts from the lane's name (an organisation's stream cannot be known before the
pick): Redis standalone or Sentinel, not Redis Cluster, as every script of the queue.
"""

from __future__ import annotations

from enum import IntEnum

from render.queue.keys import CONSUMERS_KEY, HOLDING_PREFIX, LANE_GROUP, QUEUE_WAIT_PREFIX, WORKERS_SEEN_KEY
from render.queue.scripts import LuaScript

SYNC, ASYNC = "sync", "async"  # an entry's `answer`: to its waiting API, or finished by its worker
# Its class: a client waits for it and it is expected to be quick; a client waits for it and it is expected to
# take long (render.contract.options.TakeOptions.heavy); or no client waits for it.
INTERACTIVE, HEAVY, BATCH = "interactive", "heavy", "batch"
CLASSES = (INTERACTIVE, HEAVY, BATCH)

BELL_LENGTH = 64  # tokens kept on a lane's bell: enough to wake every idle worker of a large fleet
INTERACTIVE_WINDOW_MS = 10_000  # interactive work offered this recently keeps part of the fleet free for more
# A heavy job goes before quick ones offered up to this long after it, no further: quick work first, heavy work
# never kept waiting more than this behind it.
HEAVY_PATIENCE_MS = 1_000
FLEET_SEEN_SECONDS = 3  # a worker whose heartbeat is this recent counts in the fleet
QUEUE_WAIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)  # seconds, for the queue-wait histogram

_COMMON = f"""
local GROUP = '{LANE_GROUP}'
local function num(value) return tonumber(value) or 0 end

-- An entry added at the end of its organisation's stream, counted as waiting, the organisation ready.
local function enqueue(lane, class, org, fields)
  local stream = lane .. ':' .. class .. ':' .. org
  if redis.call('EXISTS', stream) == 0 then redis.call('XGROUP', 'CREATE', stream, GROUP, '0', 'MKSTREAM') end
  redis.call('XADD', stream, '*', unpack(fields))
  redis.call('HINCRBY', lane .. ':waiting:' .. class, org, 1)
  redis.call('HINCRBY', lane .. ':waiting', org, 1)
  redis.call('RPUSH', lane .. ':backlog', '1')
  local ready = lane .. ':ready:' .. class
  if not redis.call('ZSCORE', ready, org) then
    -- Back from idle: the class's time now, never earlier than where it left off (no credit for idling).
    local clock = num(redis.call('GET', lane .. ':clock:' .. class))
    local last = num(redis.call('HGET', lane .. ':served:' .. class, org))
    redis.call('ZADD', ready, math.max(clock, last), org)
  end
  redis.call('LPUSH', lane .. ':bell', '1')
  redis.call('LTRIM', lane .. ':bell', 0, {BELL_LENGTH - 1})
  return stream
end

-- `count` entries of an organisation's class no longer waiting (handed out, or found missing).
local function unwait(lane, class, org, count)
  for _, key in ipairs({{lane .. ':waiting:' .. class, lane .. ':waiting'}}) do
    if redis.call('HINCRBY', key, org, -count) <= 0 then redis.call('HDEL', key, org) end
  end
  redis.call('LPOP', lane .. ':backlog', count)
end
"""



class Offer(IntEnum):
    """OFFER's first value."""

    REFUSED = 0  # the lane is full and the organisation has its share waiting already
    ADDED = 1


OFFER = LuaScript(
    "OFFER", keys=["the job's record (job_key)"],
    args=["lane", "class (interactive or batch)", "organisation", "the most jobs the lane holds (max_queue)",
          "answer (sync or async)", "reference", "the JobRequest's JSON", "the record's lifetime in seconds",
          "the record's fields and values, alternating ..."],
    returns="{1} when added (and recorded); {0, waiting, share, newly_noisy} when the lane is full and the "
            "organisation has its share waiting already",
    body=_COMMON + f"local INTERACTIVE_WINDOW_MS = {INTERACTIVE_WINDOW_MS}\n" + """
local lane, class, org, most = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
if redis.call('LLEN', lane .. ':backlog') >= most then
  local mine = num(redis.call('HGET', lane .. ':waiting', org))
  local active = redis.call('HLEN', lane .. ':waiting')
  if mine == 0 then active = active + 1 end
  local share = math.max(1, math.floor(most / active))
  if mine >= share then return {0, mine, share, redis.call('SADD', lane .. ':noisy', org)} end
end
enqueue(lane, class, org, {'answer', ARGV[5], 'reference', ARGV[6], 'job', ARGV[7], 'org', org, 'class', class})
if class ~= 'batch' then redis.call('SET', lane .. ':interactive-seen', '1', 'PX', INTERACTIVE_WINDOW_MS) end
if class == 'interactive' then redis.call('SET', lane .. ':quick-seen', '1', 'PX', INTERACTIVE_WINDOW_MS) end
if #ARGV > 8 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 9))
  redis.call('EXPIRE', KEYS[1], ARGV[8])
end
return {1}
""")

TAKE = LuaScript(
    "TAKE",
    args=["worker", "how often batch takes the turn (every Nth pick while batch work and a client's both wait)",
          "the share of the fleet kept for interactive work while it comes (for quick work, from heavy work too)",
          "the lanes the worker serves, "
          "the first first ..."],
    returns="{stream, entry id, fields, seconds it waited, 1 if taken under the reserve} for the entry handed to "
            "the worker; {0} when only batch or heavy work waits and it is held back (the reserve kept for a client's "
            "work); {} when every lane is empty",
    body=_COMMON + f"""
local worker, batch_every, reserve_share = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local held_back = false

-- Whether a worker may take batch work of `lane` now: always, unless interactive work came within the window,
-- when batch may occupy the fleet but its reserve (the share, one worker at least, never the whole fleet).
-- The reserve of `lane` while interactive work comes (0: none in force).
local function reserve_now(lane)
  if reserve_share <= 0 or redis.call('EXISTS', lane .. ':interactive-seen') == 0 then return 0 end
  local now = tonumber(redis.call('TIME')[1])
  local fleet = redis.call('ZCOUNT', '{WORKERS_SEEN_KEY}', now - {FLEET_SEEN_SECONDS}, '+inf')
  return math.max(0, math.min(math.max(1, math.floor(fleet * reserve_share)), fleet - 1)), fleet
end
-- While quick captures come, heavy and batch work together may occupy the fleet but the reserve, too.
local function slow_allowed(lane)
  local reserve, fleet = reserve_now(lane)
  if reserve <= 0 or redis.call('EXISTS', lane .. ':quick-seen') == 0 then return true end
  return num(redis.call('GET', lane .. ':running:{BATCH}')) + num(redis.call('GET', lane .. ':running:{HEAVY}'))
    < fleet - reserve
end
local function batch_allowed(lane)
  local reserve, fleet = reserve_now(lane)
  return reserve <= 0 or (num(redis.call('GET', lane .. ':running:{BATCH}')) < fleet - reserve and slow_allowed(lane))
end
local BUCKETS = {{{", ".join(str(b) for b in QUEUE_WAIT_BUCKETS)}}}

local function waited(class, id)
  local now = redis.call('TIME')
  local seconds = math.max(0, (tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
                                - tonumber(string.match(id, '^(%d+)'))) / 1000)
  local histogram = '{QUEUE_WAIT_PREFIX}' .. class
  for _, bound in ipairs(BUCKETS) do
    if seconds <= bound then redis.call('HINCRBY', histogram, tostring(bound), 1) end
  end
  redis.call('HINCRBY', histogram, 'count', 1)
  redis.call('HINCRBYFLOAT', histogram, 'sum', seconds)
  return tostring(seconds)
end

local function read(stream)
  local reply = redis.pcall('XREADGROUP', 'GROUP', GROUP, worker, 'COUNT', 1, 'STREAMS', stream, '>')
  if type(reply) == 'table' and reply.err == nil and reply[1] and reply[1][2][1] then return reply[1][2][1] end
  return nil
end

local function held(stream)
  redis.call('SADD', '{HOLDING_PREFIX}' .. worker, stream)
  redis.call('SADD', '{CONSUMERS_KEY}', worker)
end

-- The next entry of a class: the first of the organisation with the lowest virtual time.
local function pick(lane, class)
  local ready = lane .. ':ready:' .. class
  while true do
    local top = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
    if #top == 0 then return nil end
    local org, score = top[1], tonumber(top[2])
    local stream = lane .. ':' .. class .. ':' .. org
    local entry = read(stream)
    if entry then
      unwait(lane, class, org, 1)
      redis.call('SET', lane .. ':clock:' .. class, score)
      redis.call('HSET', lane .. ':served:' .. class, org, score + 1)
      if num(redis.call('HGET', lane .. ':waiting:' .. class, org)) > 0 then
        redis.call('ZADD', ready, score + 1, org)
      else
        redis.call('ZREM', ready, org)
      end
      held(stream)
      if class ~= '{INTERACTIVE}' then redis.call('INCR', lane .. ':running:' .. class) end
      -- A batch job taken while the reserve is in force is told so (the worker keeps it off the reserve's CPUs).
      local reserved = (class == '{BATCH}' and reserve_now(lane) > 0) and 1 or 0
      return {{stream, entry[1], entry[2], waited(class, entry[1]), reserved}}
    end
    -- Counted as waiting but nothing to read (the data was lost): no longer ready, nor counted.
    redis.call('ZREM', ready, org)
    local stale = num(redis.call('HGET', lane .. ':waiting:' .. class, org))
    if stale > 0 then unwait(lane, class, org, stale) end
  end
end

-- When the oldest entry not yet handed out of the organisation `pick` would serve next in `class` was offered
-- (milliseconds, from its id); nil when the class has none waiting.
local function head_offered(lane, class)
  local top = redis.call('ZRANGE', lane .. ':ready:' .. class, 0, 0)
  if #top == 0 then return nil end
  local stream = lane .. ':' .. class .. ':' .. top[1]
  local last = '0-0'
  local groups = redis.pcall('XINFO', 'GROUPS', stream)
  if type(groups) ~= 'table' or groups.err then return nil end
  for _, group in ipairs(groups) do
    local fields = {{}}
    for j = 1, #group, 2 do fields[group[j]] = group[j + 1] end
    if fields['name'] == GROUP then last = fields['last-delivered-id'] end
  end
  local next_entry = redis.call('XRANGE', stream, '(' .. last, '+', 'COUNT', 1)
  if #next_entry == 0 then return nil end
  return tonumber(string.match(next_entry[1][1], '^(%d+)'))
end

-- The classes a client waits for, in the order they are served: quick work first, unless the heavy job next in
-- turn was offered more than HEAVY_PATIENCE_MS before the quick one next in turn.
local function foreground(lane)
  if redis.call('EXISTS', lane .. ':ready:{HEAVY}', lane .. ':ready:{INTERACTIVE}') == 2 then
    local quick, heavy = head_offered(lane, '{INTERACTIVE}'), head_offered(lane, '{HEAVY}')
    if quick and heavy and heavy + {HEAVY_PATIENCE_MS} < quick then return {{'{HEAVY}', '{INTERACTIVE}'}} end
  end
  return {{'{INTERACTIVE}', '{HEAVY}'}}
end

for i = 4, #ARGV do
  local lane = ARGV[i]
  local taken = nil
  local order = foreground(lane)
  -- Heavy work held back while quick captures come and slow work occupies all but the reserve.
  local heavy_held = redis.call('EXISTS', lane .. ':ready:{HEAVY}') == 1 and not slow_allowed(lane)
  if heavy_held then order = {{'{INTERACTIVE}'}} end
  if redis.call('EXISTS', lane .. ':ready:{BATCH}') == 1 and not batch_allowed(lane) then
    for _, class in ipairs(order) do
      taken = taken or pick(lane, class)
    end
    held_back = held_back or not taken
  else
    local waiting_foreground = redis.call('EXISTS', lane .. ':ready:{INTERACTIVE}', lane .. ':ready:{HEAVY}') > 0
    if waiting_foreground and redis.call('EXISTS', lane .. ':ready:{BATCH}') == 1
       and redis.call('INCR', lane .. ':turn') % batch_every == 0 then
      table.insert(order, 1, '{BATCH}')
    else
      table.insert(order, '{BATCH}')
    end
    for _, class in ipairs(order) do
      taken = taken or pick(lane, class)
    end
  end
  held_back = held_back or (heavy_held and not taken)
  if taken then return taken end
  if redis.call('EXISTS', lane) == 1 then  -- the lane's own stream: jobs queued before the hand-off was fair
    local entry = read(lane)
    if entry then
      held(lane)
      return {{lane, entry[1], entry[2], '0'}}
    end
  end
end
if held_back then return {{0}} end
return {{}}
""")

WAITING = LuaScript(
    "WAITING", keys=["the lanes ..."],
    returns="the jobs waiting in all of them (the lanes' own streams counted too)",
    body=f"""
local total = 0
for _, lane in ipairs(KEYS) do
  total = total + redis.call('LLEN', lane .. ':backlog')
  if redis.call('EXISTS', lane) == 1 then
    local pending = redis.pcall('XPENDING', lane, '{LANE_GROUP}')
    local handed = (type(pending) == 'table' and pending.err == nil) and pending[1] or 0
    total = total + redis.call('XLEN', lane) - handed
  end
end
return total
""")

# A held batch or heavy job left the worker (done, or taken back): the lane's count of them running goes down; never
# below zero, so a count that went before its jobs (a Redis restart) cannot leave the reserve too large for good.
_RUNNING = f"""
local function not_running(lane, class)
  if class == nil or class == '{INTERACTIVE}' then return end
  local running = lane .. ':running:' .. class
  if redis.call('DECR', running) < 0 then redis.call('SET', running, 0) end
end
"""

_HELD_BY = f"""
local function held_by(stream, id, consumer)
  local held = redis.pcall('XPENDING', stream, '{LANE_GROUP}', id, id, 1)
  return type(held) == 'table' and held.err == nil and #held == 1 and held[1][2] == consumer
end
"""



class Start(IntEnum):
    """What START answers."""

    NOT_OWN = 0  # the entry is no longer the worker's: another has it now
    STARTED = 1  # the worker renders it
    CANCELLED = 2  # its owner cancelled it before it started (CANCEL): the worker drops it


START = LuaScript(
    "START", keys=["the stream", "the job's record", "the in-flight set"],
    args=["entry id", "worker", "the record's lifetime in seconds", "reference",
          "'1' for an async job (watched by the sweep of orphans)"],
    returns="a Start",
    body=_HELD_BY + """
if not held_by(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
if redis.call('HGET', KEYS[2], 'status') == 'cancelled' then return 2 end
redis.call('HSET', KEYS[2], 'status', 'rendering', 'worker', ARGV[2], 'lane', KEYS[1], 'entry', ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[3])
if ARGV[5] == '1' then redis.call('SADD', KEYS[3], ARGV[4]) end
return 1
""")



class Cancel(IntEnum):
    """What CANCEL answers. START and CANCEL both look at the record's status, so exactly one of them wins; a
    cancelled entry stays in its stream until a worker reaches it and drops it (START answers CANCELLED)."""

    MONITOR_RUN = -1  # a monitor's run is not cancelled one by one (pausing the monitor stops its runs)
    TOO_LATE = 0  # started (or ended) already: it runs to its end
    CANCELLED = 1  # marked cancelled, its request dropped


CANCEL = LuaScript(
    "CANCEL", keys=["the job's record"],
    returns="a Cancel: an async job nobody has started (queued, its request still in `payload`) is cancelled",
    body="""
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'queued' or redis.call('HEXISTS', KEYS[1], 'payload') == 0 then return 0 end
if redis.call('HEXISTS', KEYS[1], 'monitor') == 1 then return -1 end
redis.call('HSET', KEYS[1], 'status', 'cancelled')
redis.call('HDEL', KEYS[1], 'payload')
return 1
""")

DONE = LuaScript(
    "DONE", keys=["the stream"], args=["entry id", "worker", "the entry's class", "the stream's lane"],
    returns="1: the entry is off its stream (which goes when empty); the worker holds nothing there any more",
    body=_RUNNING + f"""
not_running(ARGV[4], ARGV[3])
redis.call('XACK', KEYS[1], '{LANE_GROUP}', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
redis.pcall('XGROUP', 'DELCONSUMER', KEYS[1], '{LANE_GROUP}', ARGV[2])
redis.call('SREM', '{HOLDING_PREFIX}' .. ARGV[2], KEYS[1])
local own = string.match(KEYS[1], ':{INTERACTIVE}:[^:]+$') or string.match(KEYS[1], ':{HEAVY}:[^:]+$')
  or string.match(KEYS[1], ':{BATCH}:[^:]+$')
if own and redis.call('XLEN', KEYS[1]) == 0 then
  local pending = redis.pcall('XPENDING', KEYS[1], '{LANE_GROUP}')
  if type(pending) == 'table' and pending.err == nil and pending[1] == 0 then redis.call('DEL', KEYS[1]) end
end
return 1
""")



class TakeBack(IntEnum):
    """What TAKE_BACK answers."""

    NOT_HELD = 0  # not held by that worker (any more)
    LEFT_TO_ANSWER = 1  # removed; a sync job's waiting API answers it, an async one lost twice is the sweep's
    OFFERED_AGAIN = 2  # never started: offered again, at the end of its organisation's stream
    OFFERED_AFTER_LOSS = 3  # an async job lost while rendering, for the first time: offered again, marked lost


TAKE_BACK = LuaScript(
    "TAKE_BACK", keys=["the stream", "the job's record", "the in-flight set"],
    args=["entry id", "the worker holding it", "reference", "the stream's lane"],
    returns="a TakeBack",
    body=_COMMON + _HELD_BY + _RUNNING + f"""
local stream, id, worker, lane = KEYS[1], ARGV[1], ARGV[2], ARGV[4]
if not held_by(stream, id, worker) then return 0 end
local record = redis.call('HMGET', KEYS[2], 'worker', 'status')
local entry = redis.call('XRANGE', stream, id, id)
redis.call('XACK', stream, GROUP, id)
redis.call('XDEL', stream, id)
if #entry == 0 then return 1 end
local fields = entry[1][2]
local values = {{}}
for i = 1, #fields, 2 do values[fields[i]] = fields[i + 1] end
not_running(lane, values['class'])
local function again()
  if values['org'] and values['class'] then return enqueue(lane, values['class'], values['org'], fields) end
  redis.call('XADD', stream, '*', unpack(fields))  -- an entry of the lane's own stream (before the upgrade)
end
if record[1] ~= worker then
  again()
  return 2
end
if (values['answer'] or values['kind']) == '{ASYNC}' and record[2] == 'rendering' and not values['lost'] then
  redis.call('HSET', KEYS[2], 'status', 'queued')
  redis.call('HDEL', KEYS[2], 'worker', 'lane', 'entry')
  redis.call('SREM', KEYS[3], ARGV[3])
  table.insert(fields, 'lost')
  table.insert(fields, worker)
  again()
  return 3
end
return 1
""")
