SELECT FLOOR(cost / 10) AS band, clinic, SUM(cost) AS total FROM visits GROUP BY band, clinic ORDER BY total DESC
