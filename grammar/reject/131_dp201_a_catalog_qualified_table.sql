-- expect: DP201
SELECT COUNT(*) FROM memory.census.people
