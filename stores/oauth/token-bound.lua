-- The live tokens of one client and kind, bounded (tokens-redis.ts `bound`; docs/oauth.md, "Tokens per client").
-- KEYS[1] = gw:oauth:ctok:<kind>:{sha256(ns, api, client)}: a sorted set of token hashes scored by expiry.
-- ARGV[1] = the new token's hash, ARGV[2] = its expiry (unix seconds, to the ms of issuance),
-- ARGV[3] = now (unix seconds), ARGV[4] = the bound.
-- The new token always scores highest: when its expiry is not above the set's highest (tokens issued in the
-- same ms, a gateway whose clock is behind another's, a lifetime shortened) it is placed 1 ms above it, so
-- ZPOPMIN takes the oldest issued and never the new one (equal scores would fall to the hashes' order).
-- Expired members are dropped first; past the bound the lowest are popped. One script: two gateways
-- issuing at once revoke only what is over the bound. Returns the popped hashes (the caller revokes them).
local key = KEYS[1]
local score = tonumber(ARGV[2])
local max = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[3])
redis.call('ZREM', key, ARGV[1])
local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if top[2] ~= nil and tonumber(top[2]) >= score then score = tonumber(top[2]) + 0.001 end
redis.call('ZADD', key, score, ARGV[1])
-- the set lives as long as its highest score (the new token's)
redis.call('EXPIREAT', key, math.max(1, math.ceil(score)))
local card = redis.call('ZCARD', key)
if card <= max then return {} end
local popped = redis.call('ZPOPMIN', key, card - max)
local out = {}
for i = 1, #popped, 2 do out[#out + 1] = popped[i] end
return out
