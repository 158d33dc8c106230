-- Queue statements are short and run thousands of times a second; Postgres's
-- JIT compiler judges the claim statement expensive on a deep backlog and
-- spends seconds compiling it (3.5 s instead of 12 ms with 100,000 jobs
-- waiting on a server with jit = on). Turn it off for this database's new
-- sessions. ALTER DATABASE needs the owner or a superuser; where the role
-- may not, skiplock still works, only slower on servers with JIT enabled.
DO $$
BEGIN
  EXECUTE format('ALTER DATABASE %I SET jit = off', current_database());
EXCEPTION WHEN insufficient_privilege THEN
  RAISE NOTICE 'skiplock: could not turn off JIT for database %; consider ALTER DATABASE ... SET jit = off', current_database();
END
$$;
