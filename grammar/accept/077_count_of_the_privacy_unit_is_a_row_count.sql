SELECT COUNT(person_id) FROM visits
