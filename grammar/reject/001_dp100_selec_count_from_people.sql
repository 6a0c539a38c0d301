-- expect: DP100
SELEC COUNT(*) FROM people
