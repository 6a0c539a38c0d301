-- expect: DP103
SELECT COUNT(*) FROM (SELECT * FROM (SELECT * FROM read_csv('/etc/passwd')) a) b
