-- a FROM-subquery's column list names its items, as AS would
SELECT G, COUNT(*) AS n FROM (SELECT sex FROM people) AS s (g) GROUP BY G
