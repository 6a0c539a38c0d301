-- expect: DP206
SELECT COUNT(*) FROM (SELECT age FROM people p JOIN visits v ON p.id = v.person_id) t
