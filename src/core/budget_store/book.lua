-- One token's request budget in Redis: one atomic script per booking, by the Redis server's
-- clock (never the callers'), with the pacing rule of src/core/budget.rs (`slot`).
--
-- KEYS[1]: the sends (a sorted set: score = the booked time, member = a unique name)
-- KEYS[2]: the rest (a hash: blocked_until, keep)
-- ARGV[1]: "book" | "block" | "view"
-- ARGV[2]: requests per window (0: no limit: only a server's wait is read)
-- ARGV[3]: the window (seconds)
-- ARGV[4]: book: the longest wait taken (seconds); block: the server's wait (seconds)
-- ARGV[5]: book: this send's unique name
--
-- Every number goes back as a string: Redis turns a Lua number into an integer.
local MAX_BLOCK = 6 * 3600
local MAX_KEEP = 86400
local MAX_SENDS = 20000

-- Redis before 5 replicates scripts whole, refusing writes after TIME; effects are replicated since.
if redis.replicate_commands then redis.replicate_commands() end

local op = ARGV[1]
local n = tonumber(ARGV[2]) or 0
local window = tonumber(ARGV[3]) or 0
local arg = tonumber(ARGV[4]) or 0

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000

local function num(v)
  local x = tonumber(v)
  if x == nil or x ~= x or x == math.huge or x == -math.huge then return 0 end
  return x
end

local blocked = num(redis.call('HGET', KEYS[2], 'blocked_until'))
if blocked <= now or blocked > now + MAX_BLOCK then blocked = 0 end
-- The longest window any client of the token paces by: sends are kept that long.
local keep = math.min(math.max(num(redis.call('HGET', KEYS[2], 'keep')), window, 0), MAX_KEEP)

local function f(x) return string.format('%.6f', x) end

-- Both keys live as long as what they hold can matter.
local function expire(extra)
  local ms = math.ceil((keep + extra + 60) * 1000)
  redis.call('PEXPIRE', KEYS[1], ms)
  redis.call('PEXPIRE', KEYS[2], ms)
end

if op == 'block' then
  local until_ = now + math.min(math.max(arg, 0), MAX_BLOCK)
  if until_ > blocked then
    blocked = until_
    redis.call('HSET', KEYS[2], 'blocked_until', f(blocked))
  end
  expire(blocked - now)
  return {f(now), f(blocked)}
end

-- Sends older than the longest window, or further ahead than a booking can be, are dropped.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', f(now - keep))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '(' .. f(now + MAX_BLOCK + keep), '+inf')
local count = redis.call('ZCARD', KEYS[1])
if count > MAX_SENDS then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, count - MAX_SENDS - 1)
  count = MAX_SENDS
end

if op == 'view' then
  -- Counted, not listed: a window may hold 20,000 sends.
  local in_window = redis.call('ZCOUNT', KEYS[1], '(' .. f(now - window), '+inf')
  local used = redis.call('ZCOUNT', KEYS[1], '(' .. f(now - window), f(now))
  local oldest = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. f(now - window), f(now), 'WITHSCORES', 'LIMIT', 0, 1)
  local first = ''
  if #oldest >= 2 then first = oldest[2] end
  return {f(now), f(blocked), tostring(in_window), tostring(used), first}
end

-- op == 'book'
local at = math.max(now, blocked)
if n > 0 and count >= n then
  -- The send n places back must be a window old, and a little more (1 % of the window, 10 ms
  -- to 1 s): the server counts arrivals.
  local back = redis.call('ZRANGE', KEYS[1], count - n, count - n, 'WITHSCORES')
  if #back >= 2 then
    local slack = math.min(math.max(window * 0.01, 0.01), 1.0)
    at = math.max(at, num(back[2]) + window + slack)
  end
end
local wait = at - now
if n == 0 then
  return {'unbooked', f(wait)}
end
if wait > arg then
  return {'too_long', f(wait)}
end
redis.call('ZADD', KEYS[1], f(at), ARGV[5])
redis.call('HSET', KEYS[2], 'keep', f(keep))
expire(math.max(wait, blocked - now))
return {'booked', f(wait)}
