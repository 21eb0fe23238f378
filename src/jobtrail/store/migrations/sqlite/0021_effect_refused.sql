-- An effect the provider refused: see PostgreSQL's 0021 for why. SQLite cannot change a CHECK
-- in place, so the table is rebuilt with the same columns, constraints and rows (nothing
-- references jobtrail_steps, and it has no index of its own beyond its keys).
CREATE TABLE jobtrail_steps_new (
    task_id      INTEGER NOT NULL REFERENCES jobtrail_tasks (id),
    name         TEXT    NOT NULL,
    is_effect    INTEGER NOT NULL CHECK (is_effect IN (0, 1)),
    status       TEXT    NOT NULL CHECK (status IN ('intent', 'confirmed', 'refused')),
    effect_key   TEXT UNIQUE,
    result       TEXT CHECK (result IS NULL OR json_valid(result)),
    attempt      INTEGER NOT NULL,
    error        TEXT,
    created_at   REAL    NOT NULL,
    confirmed_at REAL,
    PRIMARY KEY (task_id, name),
    CHECK ((status = 'confirmed') = (confirmed_at IS NOT NULL)),
    CHECK ((is_effect = 1) = (effect_key IS NOT NULL))
);
INSERT INTO jobtrail_steps_new
    (task_id, name, is_effect, status, effect_key, result, attempt, error, created_at,
     confirmed_at)
SELECT task_id, name, is_effect, status, effect_key, result, attempt, error, created_at,
       confirmed_at
FROM jobtrail_steps;
DROP TABLE jobtrail_steps;
ALTER TABLE jobtrail_steps_new RENAME TO jobtrail_steps;
