-- expect: DP206
SELECT COUNT(*) FROM people p JOIN visits v ON p.id = v.person_id
