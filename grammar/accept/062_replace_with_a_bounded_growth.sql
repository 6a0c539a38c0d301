SELECT COUNT(*) FROM people WHERE replace(zip, '0', 'ab') LIKE '%ab%'
