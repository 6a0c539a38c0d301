SELECT MODE(state) FROM people WHERE age > 30
