-- expect: DP103
-- caret: read_csv('/etc/passwd')
SELECT COUNT(*) FROM read_csv('/etc/passwd')
