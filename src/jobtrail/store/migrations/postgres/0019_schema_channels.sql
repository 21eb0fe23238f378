-- The NOTIFY channels of this schema's store. PostgreSQL's channels belong to the database,
-- not to a schema: with one channel name for every store, an enqueue in one schema woke the
-- idle workers of every other jobtrail schema in the database (each then claimed for
-- nothing), and a completion woke every schema's result waiters. A store in `public` keeps
-- the plain names (`jobtrail_queued`, `jobtrail_finished`); a store in another schema gets
-- them suffixed with a hash of the schema's name (a shared hash only shares wake-ups, as
-- before). The suffix is fixed here, from the schema the tables are created in, so every
-- process that reaches these tables names the same channels whatever else its search_path
-- holds. Senders call the function in their statements (inlined: a constant); listeners ask
-- it, through the pool, which name to LISTEN on (store/postgres/listen.py).
DO $migration$
BEGIN
    EXECUTE format(
        'CREATE FUNCTION jobtrail_channel(name text) RETURNS text'
        ' LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        format('SELECT ''jobtrail_'' || name || %L',
               CASE WHEN current_schema() = 'public' THEN ''
                    ELSE '_' || to_hex(hashtext(current_schema())) END));
END
$migration$;
