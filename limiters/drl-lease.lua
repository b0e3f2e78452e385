-- The DRL counter's lease (drl-counter.ts, the same rule as its memory twin).
-- KEYS[1] = gw:{bucket}:drl, a hash of slot index -> tokens granted in (recorded for) that slot.
-- ARGV = asked, rate, slotMs, now, backSlot, back, life.
-- Returns { granted, left, nextFreeMs, slot }. Slots out of the window are deleted as they are read; the
-- key expires one slot after its last counted slot leaves the window.
local key = KEYS[1]
local asked = tonumber(ARGV[1])
local rate = math.floor(tonumber(ARGV[2]))
if rate < 0 then rate = 0 end
local slotMs = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local backSlot = tonumber(ARGV[5])
local back = tonumber(ARGV[6])
local life = tonumber(ARGV[7])
local w = {{WINDOW_SLOTS}}
local cur = math.floor(now / slotMs)
local low = cur - w
if back > 0 and backSlot > low then
  local n = redis.call('HINCRBY', key, backSlot, -back)
  if n <= 0 then redis.call('HDEL', key, backSlot) end
end
local flat = redis.call('HGETALL', key)
local used = 0
local future = 0
local oldest = nil
local last = nil
for i = 1, #flat, 2 do
  local s = tonumber(flat[i])
  local n = tonumber(flat[i + 1])
  if s <= low then
    redis.call('HDEL', key, flat[i])
  else
    used = used + n
    if s > cur then future = future + n end
    if n > 0 and (oldest == nil or s < oldest) then oldest = s end
    if last == nil or s > last then last = s end
  end
end
local room = rate - used
local slot = cur
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
  if oldest == nil or slot < oldest then oldest = slot end
  if last == nil or slot > last then last = slot end
end
if last ~= nil then redis.call('PEXPIRE', key, (last + w + 1) * slotMs - now) end
local left = rate - used - granted
if left < 0 then left = 0 end
local nextFree = 0
if left == 0 and oldest ~= nil then
  nextFree = (oldest + w) * slotMs - now
  if nextFree < 1 then nextFree = 1 end
end
return { granted, left, nextFree, slot }
