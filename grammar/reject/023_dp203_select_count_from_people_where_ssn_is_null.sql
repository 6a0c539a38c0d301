-- expect: DP203
SELECT COUNT(*) FROM people WHERE "Ssn" IS NULL
