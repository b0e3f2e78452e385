local now = tonumber(ARGV[1]); local max = tonumber(ARGV[2]); local renewal = tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'used', 'renews')
local used = tonumber(s[1]); local renews = tonumber(s[2]) or 0
if used == nil or (renews > 0 and now >= renews) then
  used = 0
  if renewal > 0 then renews = now + renewal else renews = 0 end
end
local allowed = 0
if used < max then used = used + 1; allowed = 1 end
redis.call('HSET', KEYS[1], 'used', used, 'renews', renews)
if renews > 0 then redis.call('PEXPIRE', KEYS[1], renews - now + 1000) else redis.call('PERSIST', KEYS[1]) end
return {allowed, used, tostring(renews)}
