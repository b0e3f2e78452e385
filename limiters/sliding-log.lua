local now = tonumber(ARGV[1]); local win = tonumber(ARGV[2]); local rate = tonumber(ARGV[3])
local mode = ARGV[5]
-- ARGV[6..8]: the sentinel's spare lease (sentinel.ts): the asking gateway's id ('' = no ask), its demand
-- (requests per s on the bucket), the lease's life (ms). ARGV[9..12]: smoothing, for a smoothed limit only.
local gid = ARGV[6] or ''
local smoothed = #ARGV >= 12
-- a claim ('4', the sentinel's request without a spare token): a standing sentinel refuses it, recorded
-- for smoothing as a refusal ('3')
local standing = nil
if mode == '4' then
  local u = tonumber(redis.call('GET', KEYS[3]) or '0')
  if u > now then standing = u end
end
local refusal = mode == '3' or standing ~= nil
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
if mode == '3' or (standing ~= nil and smoothed) then
  redis.call('ZADD', KEYS[4], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[4], win)
end
if smoothed then
  local thr = tonumber(ARGV[9]); local step = tonumber(ARGV[10]); local trig = tonumber(ARGV[11]); local delay = tonumber(ARGV[12])
  local lower = math.min(math.max(thr, 0), rate)
  local st = redis.call('HMGET', KEYS[2], 'a', 't')
  local a = math.min(math.max(tonumber(st[1]) or lower, lower), rate)
  local t = tonumber(st[2]) or 0
  old = a
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - win)
  local r = count + redis.call('ZCARD', KEYS[4])
  if not refusal then r = r + 1 end
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
-- The spare lease (KEYS[6], a hash: gateway id -> 'cap:until:demand:prevCap:prevUntil'): of the tokens the
-- bound spares beyond the allowance (floor(1.1 x allowance) - allowance), the tokens a gateway may admit on
-- its sentinel read alone, without waiting for the store's count. A gateway's share follows its demand
-- among the gateways whose leases live; the spares held (each gateway's cap, and its previous one until
-- that lived out, + GRACE for writes still on their way) never sum to more than the spare.
local function spareLease()
  if gid == '' then return 0, 0 end
  local whole = math.floor(allowance)
  local spare = math.floor(whole * 11 / 10) - whole
  local life = tonumber(ARGV[8])
  local demand = tonumber(ARGV[7]) or 0
  local flat = redis.call('HGETALL', KEYS[6])
  local held = 0
  local others = 0
  local mine = nil
  for i = 1, #flat, 2 do
    local v = {}
    for x in string.gmatch(flat[i + 1], '[^:]+') do v[#v + 1] = tonumber(x) end
    if flat[i] == gid then
      mine = v
    elseif now >= v[2] + {{SPARE_GRACE_MS}} and now >= v[5] + {{SPARE_GRACE_MS}} then
      redis.call('HDEL', KEYS[6], flat[i])
    else
      local h = 0
      if now < v[2] + {{SPARE_GRACE_MS}} then h = v[1] end
      if now < v[5] + {{SPARE_GRACE_MS}} and v[4] > h then h = v[4] end
      held = held + h
      if now < v[2] then others = others + v[3] end
    end
  end
  local cap = spare - held
  if demand + others > 0 then
    local share = math.ceil(spare * demand / (demand + others))
    if share < cap then cap = share end
  end
  if cap < 0 then cap = 0 end
  local pcap = 0
  local puntil = 0
  if mine ~= nil and now < mine[2] + {{SPARE_GRACE_MS}} then
    pcap = mine[1]; puntil = mine[2]
  end
  redis.call('HSET', KEYS[6], gid, cap .. ':' .. (now + life) .. ':' .. tostring(demand) .. ':' .. pcap .. ':' .. puntil)
  redis.call('PEXPIRE', KEYS[6], 2 * life + {{SPARE_GRACE_MS}})
  return cap, now + life
end
if mode == '3' then return {0, count, tostring(allowance), tostring(now), ev, tostring(old), 0, 0} end
if standing ~= nil then
  local c, u = spareLease()
  return {0, count + pre, tostring(allowance), tostring(standing), ev, tostring(old), c, u}
end
local whole = math.floor(allowance)
-- what the log may hold besides the DRL's grants
local room = whole - pre
local allowed = 0
if count < room then allowed = 1 end
local n = count
if allowed == 1 or (mode ~= '2' and mode ~= '4') then
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
if (mode == '1' or (mode == '4' and allowed == 1)) and n + pre >= whole then
  local until_ = tonumber(redis.call('GET', KEYS[3]) or '0')
  if until_ <= now then redis.call('SET', KEYS[3], tostring(now + win), 'PX', win) end
end
-- a claim refused by a full log records its request for smoothing's R, as a refusal
if mode == '4' and allowed == 0 and smoothed then
  redis.call('ZADD', KEYS[4], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[4], win)
end
local c, u = 0, 0
if mode == '1' or mode == '4' then c, u = spareLease() end
return {allowed, n + pre, tostring(allowance), tostring(nextTs), ev, tostring(old), c, u}
