"""The Redis store's creation of a task, bounded by ``max_tasks``, as one Lua script.

Redis runs a script atomically, so counting the tasks, making room and writing the new one
are a single step against every process using the server: two processes creating at once
never pass the bound together. The rule is the memory and SQLite stores' one: when the
store holds ``max_tasks`` tasks, the expired ones go (they leave the count), then the oldest
ended one, and only when every task still runs is the creation refused.

The count is the size of the ``expiry`` sorted set, which holds every task (one without a
TTL scored ``+inf``); ``ended`` holds the terminal ones scored by their ``created_at`` (so the
transition that ends a task adds it in its own ``MULTI``, with nothing more to read). Members
of both are ``[owner, task_id]`` as JSON, so the script finds every key of a task it drops.
"""

from __future__ import annotations

INSERT_SCRIPT = """
local expiry, ended, seq, task_key, owner_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local max_tasks, now, prefix, batch = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])
local record, member, px, task_id, ends = ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local terminal = ARGV[10] == '1'

local function drop(gone)
  local entry = cjson.decode(gone)
  redis.call('DEL', prefix .. 'task:' .. entry[2])
  redis.call('ZREM', prefix .. 'owner:' .. entry[1], entry[2])
  redis.call('ZREM', expiry, gone)
  redis.call('ZREM', ended, gone)
end

if redis.call('ZCARD', expiry) >= max_tasks then
  repeat
    local expired = redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, batch)
    for _, gone in ipairs(expired) do drop(gone) end
  until #expired < batch or redis.call('ZCARD', expiry) < max_tasks
  if redis.call('ZCARD', expiry) >= max_tasks then
    local oldest = redis.call('ZRANGE', ended, 0, 0)
    if #oldest == 0 then return -1 end
    drop(oldest[1])
  end
end

local position = redis.call('INCR', seq)
if px == '' then
  redis.call('SET', task_key, record)
else
  redis.call('SET', task_key, record, 'PX', px)
end
redis.call('ZADD', owner_key, position, task_id)
redis.call('ZADD', expiry, ends, member)
if terminal then redis.call('ZADD', ended, ARGV[11], member) end
return position
"""
"""KEYS: ``expiry``, ``ended``, ``seq``, the task's key, its owner's key. ARGV: ``max_tasks``,
now, the key prefix, how many expired tasks to drop per step, the record as JSON, its index
member, its key's TTL in ms (``""``: none), its id, the end of its TTL (``+inf``: none),
``1`` if it is terminal already (a record restored from a backup) or ``0``, its creation time.
Returns the task's position (creation sequence number), or -1 when every task still runs."""

FULL = -1
"""What :data:`INSERT_SCRIPT` returns when the store is full of running tasks."""
