-- A handler's return value is kept with its task (JSON text, written by the
-- completing transition in the same transaction), and every failed attempt's transition keeps
-- the formatted traceback and the exception's class path (``builtins.KeyError``).
ALTER TABLE jobtrail_tasks ADD COLUMN result TEXT CHECK (result IS NULL OR json_valid(result));
ALTER TABLE jobtrail_transitions ADD COLUMN traceback TEXT;
ALTER TABLE jobtrail_transitions ADD COLUMN error_class TEXT;
