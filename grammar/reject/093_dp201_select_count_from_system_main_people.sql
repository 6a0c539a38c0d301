-- expect: DP201
SELECT COUNT(*) FROM system.main.people
