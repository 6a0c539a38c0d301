select count(*) from PEOPLE
