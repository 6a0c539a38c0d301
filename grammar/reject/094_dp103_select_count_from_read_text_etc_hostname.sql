-- expect: DP103
SELECT COUNT(*) FROM read_text('/etc/hostname')
