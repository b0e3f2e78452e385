-- An OAuth token record written back into a store that lost its data (token-keeper.ts).
-- KEYS[1] = gw:oauth:tok:{hash}, KEYS[2] = gw:oauth:revoked:{hash}, KEYS[3] = gw:oauth:rt-used:{hash}.
-- ARGV[1] = the JSON record, ARGV[2] = its exp (unix seconds, EXAT).
-- Returns 1 when written, 0 when skipped: a revoked token or a used refresh token never comes back, and an
-- existing record is never overwritten (NX).
if redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
if redis.call('SET', KEYS[1], ARGV[1], 'EXAT', ARGV[2], 'NX') then return 1 end
return 0
