-- The DRL counter's lease (drl-counter.ts, the same rule as its memory twin).
-- KEYS[1] = gw:{bucket}:drl, a hash of slot index -> tokens granted in (recorded for) that slot, and
-- field `ms`: the slot length the indexes count in.
-- KEYS[2] = gw:{bucket}:log, the bucket's sliding window log: a limit that drl_threshold moves from the
-- log to the DRL (its N fell) finds what the log counted in the window counted here too.
-- ARGV = asked, rate, slotMs, now, backSlot, back, life, over, window, wide, delay. The last `window` slots
-- (per) hold at most rate, the last `wide` at most rate + over; fields `w` and `p` record `wide` and `window`
-- (the log counts the grants of the last `p` slots).
-- A short lease is recorded `delay` slots ahead (counted from now all the same: it holds its tokens longer).
-- ARGV[12] = span, ARGV[13] = late, ARGV[14..] = moves: an exact window's span window (ms; 0 = none) counts
-- fields `a<ms>` (span records: a grant's admissions reach the upstream by then), at most rate + over of
-- them in the last `span` ms; a grant adds its record at now + late; moves (triples from, to, n; to 0 = drop)
-- are applied first (the gateway moves a record once it knows when the admissions left).
-- Returns { granted, left, nextFreeMs, slot }. Slots out of the window are deleted as they are read; the
-- key expires one slot after its last counted slot leaves the window. A changed slot length (`per` edited)
-- renumbers the slots first, each to the new slot holding its last ms (counted at least as long as before).
local key = KEYS[1]
local asked = tonumber(ARGV[1])
local rate = math.floor(tonumber(ARGV[2]))
if rate < 0 then rate = 0 end
local slotMs = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local backSlot = tonumber(ARGV[5])
local back = tonumber(ARGV[6])
local life = tonumber(ARGV[7])
local over = tonumber(ARGV[8])
local wPer = tonumber(ARGV[9])
local w = tonumber(ARGV[10])
local delay = tonumber(ARGV[11])
if delay == nil or delay < 0 then delay = 0 end
local span = tonumber(ARGV[12]) or 0
local late = tonumber(ARGV[13]) or 0
if late < 0 then late = 0 end
for i = 14, #ARGV - 2, 3 do
  local n = tonumber(ARGV[i + 2])
  local from = 'a' .. ARGV[i]
  if redis.call('HINCRBY', key, from, -n) <= 0 then redis.call('HDEL', key, from) end
  if tonumber(ARGV[i + 1]) > 0 then redis.call('HINCRBY', key, 'a' .. ARGV[i + 1], n) end
end
local cur = math.floor(now / slotMs)
local low = cur - w
local lowPer = cur - wPer
local flat = redis.call('HGETALL', key)
local ms = nil
local storedW = nil
local storedP = nil
for i = 1, #flat, 2 do
  if flat[i] == 'ms' then ms = tonumber(flat[i + 1]) end
  if flat[i] == 'w' then storedW = tonumber(flat[i + 1]) end
  if flat[i] == 'p' then storedP = tonumber(flat[i + 1]) end
end
if ms ~= nil and ms ~= slotMs then
  local moved = {}
  for i = 1, #flat, 2 do
    if tonumber(flat[i]) ~= nil then
      local t = math.floor(((tonumber(flat[i]) + 1) * ms - 1) / slotMs)
      moved[t] = (moved[t] or 0) + tonumber(flat[i + 1])
      redis.call('HDEL', key, flat[i])
    end
  end
  for t, n in pairs(moved) do
    if n > 0 then redis.call('HSET', key, t, n) end
  end
  redis.call('HSET', key, 'ms', slotMs, 'w', w, 'p', wPer)
end
local changed = ms ~= nil and ms ~= slotMs
if back > 0 and backSlot > low then
  local n = redis.call('HINCRBY', key, backSlot, -back)
  if n <= 0 then redis.call('HDEL', key, backSlot) end
  changed = true
end
if changed then flat = redis.call('HGETALL', key) end
local used = 0
local usedPer = 0
local future = 0
local oldest = nil
local oldestPer = nil
local last = nil
local usedSpan = 0
local oldestSpan = nil
local lastSpan = nil
for i = 1, #flat, 2 do
  local s = tonumber(flat[i])
  local n = tonumber(flat[i + 1])
  if s == nil then
    -- the `ms`, `w` and `p` fields, and span records `a<ms>`
    local at = nil
    if string.sub(flat[i], 1, 1) == 'a' then at = tonumber(string.sub(flat[i], 2)) end
    if at ~= nil then
      if span <= 0 or at + span <= now then
        if span > 0 then redis.call('HDEL', key, flat[i]) end
      else
        usedSpan = usedSpan + n
        if oldestSpan == nil or at < oldestSpan then oldestSpan = at end
        if lastSpan == nil or at > lastSpan then lastSpan = at end
      end
    end
  elseif s <= low then
    redis.call('HDEL', key, flat[i])
  else
    used = used + n
    if s > cur then future = future + n end
    if n > 0 and (oldest == nil or s < oldest) then oldest = s end
    if last == nil or s > last then last = s end
    if s > lowPer then
      usedPer = usedPer + n
      if n > 0 and (oldestPer == nil or s < oldestPer) then oldestPer = s end
    end
  end
end
local logged = redis.call('ZCOUNT', KEYS[2], '(' .. (now - w * slotMs), '+inf')
used = used + logged
if wPer < w then logged = redis.call('ZCOUNT', KEYS[2], '(' .. (now - wPer * slotMs), '+inf') end
usedPer = usedPer + logged
local cap = rate + over
local room = rate - usedPer
if cap - used < room then room = cap - used end
if span > 0 then
  usedSpan = usedSpan + redis.call('ZCOUNT', KEYS[2], '(' .. (now - span), '+inf')
  if cap - usedSpan < room then room = cap - usedSpan end
end
local slot = cur + delay
local longRoom = math.floor(rate / {{LONG_SHARE_DIVISOR}}) - future
if life > {{LEASE_SLOTS}} and longRoom >= 1 then
  if longRoom < room then room = longRoom end
  slot = cur + life - {{LEASE_SLOTS}}
end
local granted = room
if asked < granted then granted = asked end
if granted < 0 then granted = 0 end
if granted > 0 then
  redis.call('HINCRBY', key, slot, granted)
  if ms ~= slotMs or storedW ~= w or storedP ~= wPer then redis.call('HSET', key, 'ms', slotMs, 'w', w, 'p', wPer) end
  if oldest == nil or slot < oldest then oldest = slot end
  if oldestPer == nil or slot < oldestPer then oldestPer = slot end
  if last == nil or slot > last then last = slot end
end
if span > 0 and granted > 0 then
  redis.call('HINCRBY', key, 'a' .. (now + late), granted)
  if oldestSpan == nil or now + late < oldestSpan then oldestSpan = now + late end
  if lastSpan == nil or now + late > lastSpan then lastSpan = now + late end
end
local expireMs = 0
if last ~= nil then expireMs = (last + w + 1) * slotMs - now end
if lastSpan ~= nil and lastSpan + span + 1 - now > expireMs then expireMs = lastSpan + span + 1 - now end
if expireMs > 0 then redis.call('PEXPIRE', key, expireMs) end
local leftPer = rate - usedPer - granted
local leftWide = cap - used - granted
local left = leftPer
if leftWide < left then left = leftWide end
local leftSpan = cap - usedSpan - granted
if span > 0 and leftSpan < left then left = leftSpan end
if left < 0 then left = 0 end
-- a spent window: until both windows have room (the oldest grant of each full one leaves it)
local nextFree = 0
if left == 0 then
  local at = 0
  if leftPer <= 0 and oldestPer ~= nil then at = (oldestPer + wPer) * slotMs end
  if leftWide <= 0 and oldest ~= nil and (oldest + w) * slotMs > at then at = (oldest + w) * slotMs end
  if at > 0 then
    nextFree = at - now
    if nextFree < 1 then nextFree = 1 end
  end
end
if left == 0 and span > 0 and leftSpan <= 0 and oldestSpan ~= nil then
  local free = oldestSpan + span - now
  if free < 1 then free = 1 end
  if free > nextFree then nextFree = free end
end
if left == 0 and logged > 0 then
  local first = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. (now - w * slotMs), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local free = tonumber(first[2]) + w * slotMs - now
  if free < 1 then free = 1 end
  if nextFree == 0 or free < nextFree then nextFree = free end
end
return { granted, left, nextFree, slot }
