"""Session persistence: the store protocol and the two stores that implement it.

- `base`: the `SessionStore` protocol, its records and its errors.
- `registry`: opening the store `[host] store` names, from the factories plugins register.
- `rows`: what both stores write and read the same way (event batches, header rows, read records).
- `codec`: how both keep text their databases cannot hold (lone surrogates; NUL in PostgreSQL).
- `search`: what a candidate search query means, whatever store answers it.
- `sqlite`: the embedded default store, one SQLite file.
- `postgres`: the team store in PostgreSQL (the plugin `store-postgres`; needs psycopg).
"""
