-- The NOTIFY channels of this schema's store. PostgreSQL's channels belong to the database,
-- not to a schema: with one channel name for every store, an enqueue in one schema woke the
-- idle workers of every other jobtrail schema in the database (each then claimed for
-- nothing), and a completion woke every schema's result waiters. A store in `public` keeps
-- the plain names (`jobtrail_queued`, `jobtrail_finished`); a store in another schema gets
-- them suffixed with a hash of the schema's name (a shared hash only shares wake-ups, as
-- before). Senders call this in their statements; the listeners ask it, through the pool,
-- which name to LISTEN on (store/postgres/listen.py). Inlined by the planner (one SELECT,
-- STABLE): current_schema() is the caller's, the schema its statements resolve to.
CREATE FUNCTION jobtrail_channel(name text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN current_schema() = 'public' THEN 'jobtrail_' || name
                ELSE 'jobtrail_' || name || '_' || to_hex(hashtext(current_schema())) END
$$;
