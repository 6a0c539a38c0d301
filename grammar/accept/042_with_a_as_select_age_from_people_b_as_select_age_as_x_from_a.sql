WITH a AS (SELECT age FROM people), b AS (SELECT age AS x FROM a WHERE age > 5)
SELECT SUM(x) FROM b
