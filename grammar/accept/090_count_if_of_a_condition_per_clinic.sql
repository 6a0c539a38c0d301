SELECT clinic, COUNT_IF(cost > 20) AS pricey, COUNT(*) AS visits FROM visits GROUP BY clinic
