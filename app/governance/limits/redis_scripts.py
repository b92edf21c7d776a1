"""The Lua scripts of `RedisLimitStore`: each operation is one script, atomic across processes.

A window key K is two Redis keys: a sorted set `K:z` (entry id -> time) and a hash `K:a` (entry
id -> amount, and the window's total in field `~t`). Both hold the fill marker `~f` (a member of
score +inf, a field): a window is *filled* when both have it, i.e. its entries are complete.
Redis losing either key (a restart, a fail-over, a flush, an eviction) loses a marker, and the
window then admits nothing until it is filled again from the durable record. Amounts are
integers; Lua computes in doubles, exact to 2**53, and hands them back formatted as integers.
"""

_COMMON = """
local function filled(z, a)
  return redis.call('HEXISTS', a, '~f') == 1 and redis.call('ZSCORE', z, '~f') ~= false
end
local function int(x) return string.format('%d', x) end
local function trim(z, a, cutoff)
  while true do  -- in chunks: unpack() takes a few thousand values at most
    local gone = redis.call('ZRANGEBYSCORE', z, '-inf', cutoff, 'LIMIT', 0, 1000)
    if #gone == 0 then break end
    local sum = 0
    for _, v in ipairs(redis.call('HMGET', a, unpack(gone))) do
      if v then sum = sum + tonumber(v) end
    end
    redis.call('HDEL', a, unpack(gone))
    redis.call('ZREM', z, unpack(gone))
    if sum ~= 0 then redis.call('HINCRBY', a, '~t', int(-sum)) end
  end
  return tonumber(redis.call('HGET', a, '~t') or '0')
end
local function keep(z, a, window)  -- keys live one window past their last write
  local ttl = math.ceil(window) + 1
  redis.call('EXPIRE', z, ttl)
  redis.call('EXPIRE', a, ttl)
end
local function put(z, a, id, at, amount)  -- an entry the window does not hold
  redis.call('HSET', a, id, amount)
  redis.call('ZADD', z, at, id)
  redis.call('HINCRBY', a, '~t', amount)
end
local function remove(z, a, id, old)
  redis.call('HDEL', a, id)
  redis.call('ZREM', z, id)
  redis.call('HINCRBY', a, '~t', int(-tonumber(old)))
end
"""

# KEYS: z, a per window. ARGV: now, id, n, then amount, limit, window per window.
# {'fill', i...}: windows not filled (nothing done); {'granted'}; {'refused', i, used, retry}.
ACQUIRE = (
    _COMMON
    + """
local now, id, n = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local unfilled = {}
for i = 0, n - 1 do
  if not filled(KEYS[2*i+1], KEYS[2*i+2]) then unfilled[#unfilled + 1] = tostring(i) end
end
if #unfilled > 0 then return {'fill', unpack(unfilled)} end
if redis.call('HEXISTS', KEYS[2], id) == 1 then return {'granted'} end  -- made already
for i = 0, n - 1 do
  local z, a = KEYS[2*i+1], KEYS[2*i+2]
  local amount, limit, window = tonumber(ARGV[4+3*i]), tonumber(ARGV[5+3*i]), tonumber(ARGV[6+3*i])
  local used = trim(z, a, now - window)
  if used + amount > limit then
    local retry = ''
    if amount <= limit then
      local needed, freed = used + amount - limit, 0
      local entries = redis.call('ZRANGE', z, 0, -1, 'WITHSCORES')
      for j = 1, #entries, 2 do
        if entries[j] ~= '~f' then
          freed = freed + tonumber(redis.call('HGET', a, entries[j]) or '0')
          if freed >= needed then
            retry = tostring(math.max(tonumber(entries[j+1]) + window - now, 0))
            break
          end
        end
      end
    end
    return {'refused', tostring(i), int(used), retry}
  end
end
for i = 0, n - 1 do
  local z, a = KEYS[2*i+1], KEYS[2*i+2]
  put(z, a, id, ARGV[1], ARGV[4+3*i])
  keep(z, a, tonumber(ARGV[6+3*i]))
end
return {'granted'}
"""
)

# KEYS: z, a. ARGV: now, window, first, last, then id, at, amount per entry. Adds the entries
# the window does not hold (by id: what another filler or a settle put there is not counted
# twice); the first chunk drops what a partial loss left (an entry needs its time and its
# amount), the last one totals the window and marks it filled. 0 when it was filled already.
FILL = (
    _COMMON
    + """
local z, a = KEYS[1], KEYS[2]
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
if filled(z, a) then return 0 end
if ARGV[3] == '1' then
  for _, m in ipairs(redis.call('ZRANGE', z, 0, -1)) do
    if redis.call('HEXISTS', a, m) == 0 then redis.call('ZREM', z, m) end
  end
  for _, f in ipairs(redis.call('HKEYS', a)) do
    if f ~= '~t' and redis.call('ZSCORE', z, f) == false then redis.call('HDEL', a, f) end
  end
end
for j = 5, #ARGV, 3 do
  if redis.call('HEXISTS', a, ARGV[j]) == 0 then
    redis.call('HSET', a, ARGV[j], ARGV[j+2])
    redis.call('ZADD', z, ARGV[j+1], ARGV[j])
  end
end
if ARGV[4] == '1' then
  local total, fields = 0, redis.call('HGETALL', a)
  for k = 1, #fields, 2 do
    if fields[k] ~= '~t' and fields[k] ~= '~f' then total = total + tonumber(fields[k+1]) end
  end
  redis.call('HSET', a, '~t', int(total), '~f', '1')
  redis.call('ZADD', z, '+inf', '~f')
  trim(z, a, now - window)
  keep(z, a, window)
end
return 1
"""
)

# KEYS: z, a per window. ARGV: id, now, at, then amount, mode, window per window; mode 's'
# sets the entry to the amount, 'r' only puts a lost one back.
SETTLE = (
    _COMMON
    + """
local id, now, at = ARGV[1], tonumber(ARGV[2]), ARGV[3]
for i = 0, #KEYS / 2 - 1 do
  local z, a = KEYS[2*i+1], KEYS[2*i+2]
  local amount, mode, window = ARGV[4+3*i], ARGV[5+3*i], tonumber(ARGV[6+3*i])
  local old = redis.call('HGET', a, id)
  if old then
    if mode == 's' then
      redis.call('HSET', a, id, amount)
      redis.call('HINCRBY', a, '~t', int(tonumber(amount) - tonumber(old)))
    end
  elseif tonumber(at) > now - window then  -- lost with its window while the call ran
    put(z, a, id, at, amount)
    keep(z, a, window)
  end
end
return 0
"""
)

# KEYS: z, a per window. ARGV: id.
RELEASE = (
    _COMMON
    + """
for i = 0, #KEYS / 2 - 1 do
  local z, a = KEYS[2*i+1], KEYS[2*i+2]
  local old = redis.call('HGET', a, ARGV[1])
  if old then remove(z, a, ARGV[1], old) end
end
return 0
"""
)

# KEYS: z, a. ARGV: now, window. -1 when the window is not filled.
USAGE = (
    _COMMON
    + """
if not filled(KEYS[1], KEYS[2]) then return -1 end
return trim(KEYS[1], KEYS[2], tonumber(ARGV[1]) - tonumber(ARGV[2]))
"""
)

# KEYS: z, a. ARGV: now, window, then id, at, amount, mode per entry; mode 'k' adds an entry
# the window does not hold, 's' also sets one it holds, 'd' removes it. Leaves the fill marker
# as it is: a window that is not filled still is filled from the durable record later.
MERGE = (
    _COMMON
    + """
local z, a = KEYS[1], KEYS[2]
local cutoff = tonumber(ARGV[1]) - tonumber(ARGV[2])
for j = 3, #ARGV, 4 do
  local id, at, amount, mode = ARGV[j], ARGV[j+1], ARGV[j+2], ARGV[j+3]
  local old = redis.call('HGET', a, id)
  if mode == 'd' then
    if old then remove(z, a, id, old) end
  elseif old then
    if mode == 's' then
      redis.call('HSET', a, id, amount)
      redis.call('HINCRBY', a, '~t', int(tonumber(amount) - tonumber(old)))
    end
  elseif tonumber(at) > cutoff then
    put(z, a, id, at, amount)
  end
end
if redis.call('EXISTS', a) == 1 then keep(z, a, tonumber(ARGV[2])) end
return 0
"""
)
