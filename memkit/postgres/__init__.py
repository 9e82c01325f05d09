"""PostgreSQL read the way PostgreSQL writes it: heap and TOAST pages
(:mod:`memkit.postgres.pages`), the WAL (:mod:`memkit.postgres.wal`), every layer
decoded (:mod:`memkit.postgres.decode`); a LangGraph agent's tables and data
directory as surfaces (:mod:`memkit.postgres.surfaces`); a whole database for
``memkit residue postgresql://`` (:mod:`memkit.postgres.database`)."""
