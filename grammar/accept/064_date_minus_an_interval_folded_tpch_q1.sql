SELECT sex, COUNT(*) AS n, SUM(income) AS s FROM people WHERE joined <= DATE '2021-12-01' - INTERVAL '90' DAY GROUP BY sex
