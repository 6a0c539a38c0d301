SELECT SUM(0) AS zero, SUM(age * 0) AS also_zero FROM people
