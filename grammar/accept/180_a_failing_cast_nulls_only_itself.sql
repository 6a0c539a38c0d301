-- a cast that fails on every row is NULL on its own (issue 27): the OR's other side keeps the row
SELECT COUNT(*) AS n FROM people WHERE CAST(state AS INTEGER) > 3 OR age > 60
