SELECT COUNT(*) FROM people WHERE age >= 18 AND (income < 500 OR sex = 'F') AND NOT state IN ('CA', 'NY')
