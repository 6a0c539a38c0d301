SELECT COUNT(*) FROM people WHERE income > -1.5 AND zip = '00042'
