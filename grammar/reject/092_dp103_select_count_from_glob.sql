-- expect: DP103
SELECT COUNT(*) FROM glob('*')
