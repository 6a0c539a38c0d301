-- expect: DP102
SELECT COUNT(*) FROM (SELECT age FROM people p JOIN visits v ON p.id = v.person_id) t
