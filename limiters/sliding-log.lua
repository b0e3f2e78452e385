local now = tonumber(ARGV[1]); local win = tonumber(ARGV[2]); local rate = tonumber(ARGV[3])
local mode = ARGV[5]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)
local count = redis.call('ZCARD', KEYS[1])
-- KEYS[5]: the bucket's DRL counter (drl-lease.lua). A limit drl_threshold moved here from the DRL (its N
-- rose) counts the tokens granted there in that counter's window (`pre`); preFree: when the first leaves.
local pre = 0
local preFree = nil
local flat = redis.call('HGETALL', KEYS[5])
local dms = nil
local dw = {{WINDOW_SLOTS}}
local dp = nil
for i = 1, #flat, 2 do
  if flat[i] == 'ms' then dms = tonumber(flat[i + 1]) end
  if flat[i] == 'w' then dw = tonumber(flat[i + 1]) end
  if flat[i] == 'p' then dp = tonumber(flat[i + 1]) end
end
-- a grant counts for the window of `per` and a slot (`p` + 1, a grant may come late in its slot), at most
-- the wide window `w` (an exact window's span window is 3 × per and more)
if dp ~= nil and dp + 1 < dw then dw = dp + 1 end
if dms ~= nil then
  local dlow = math.floor(now / dms) - dw
  for i = 1, #flat, 2 do
    local s = tonumber(flat[i])
    if s ~= nil and s > dlow then
      pre = pre + tonumber(flat[i + 1])
      local f = (s + dw) * dms
      if preFree == nil or f < preFree then preFree = f end
    end
  end
end
local allowance = rate
local ev = 0
local old = rate
if mode == '3' then
  redis.call('ZADD', KEYS[4], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[4], win)
end
if #ARGV >= 9 then
  local thr = tonumber(ARGV[6]); local step = tonumber(ARGV[7]); local trig = tonumber(ARGV[8]); local delay = tonumber(ARGV[9])
  local lower = math.min(math.max(thr, 0), rate)
  local st = redis.call('HMGET', KEYS[2], 'a', 't')
  local a = math.min(math.max(tonumber(st[1]) or lower, lower), rate)
  local t = tonumber(st[2]) or 0
  old = a
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - win)
  local r = count + redis.call('ZCARD', KEYS[4])
  if mode ~= '3' then r = r + 1 end
  local hold = (t == 0) or (now - t >= delay)
  if hold and r > a - step * trig and a < rate then
    a = math.min(a + step, rate); t = now; ev = 1
  elseif hold and r < a - step * (1 + trig) and a > lower then
    a = math.max(a - step, lower); t = now; ev = -1
  end
  redis.call('HSET', KEYS[2], 'a', tostring(a), 't', tostring(t))
  redis.call('PEXPIRE', KEYS[2], math.max(math.max(win, delay) * 10, {{SMOOTHING_MIN_TTL_MS}}))
  allowance = a
end
if mode == '3' then return {0, count, tostring(allowance), tostring(now), ev, tostring(old)} end
local whole = math.floor(allowance)
-- what the log may hold besides the DRL's grants
local room = whole - pre
local allowed = 0
if count < room then allowed = 1 end
local n = count
if allowed == 1 or mode ~= '2' then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], win)
  n = count + 1
end
local nextTs = now
if whole == 0 then
  nextTs = now + win
elseif room <= 0 then
  nextTs = preFree or (now + win)
elseif n - room >= 0 then
  local e = redis.call('ZRANGE', KEYS[1], n - room, n - room, 'WITHSCORES')
  if e[2] then nextTs = tonumber(e[2]) + win end
  if preFree ~= nil and preFree < nextTs then nextTs = preFree end
end
if mode == '1' and n + pre >= whole then
  local until_ = tonumber(redis.call('GET', KEYS[3]) or '0')
  if until_ <= now then redis.call('SET', KEYS[3], tostring(now + win), 'PX', win) end
end
return {allowed, n + pre, tostring(allowance), tostring(nextTs), ev, tostring(old)}
