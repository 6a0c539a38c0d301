SELECT COUNT(*) FROM people WHERE regexp_matches(zip, '(')
