SELECT COUNT(*) FROM "people"
