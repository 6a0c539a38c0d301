-- expect: DP201
-- caret: '/etc/passwd'
SELECT COUNT(*) FROM '/etc/passwd'
