-- A handler's return value is kept with its task (written by the completing
-- transition, in the same statement), and every failed attempt's transition keeps the
-- formatted traceback and the exception's class path (``builtins.KeyError``).
ALTER TABLE jobtrail_tasks ADD COLUMN result jsonb;
ALTER TABLE jobtrail_transitions ADD COLUMN traceback text;
ALTER TABLE jobtrail_transitions ADD COLUMN error_class text;
