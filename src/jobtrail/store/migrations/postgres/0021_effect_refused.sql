-- An effect the provider refused: the call
-- raised with evidence that nothing happened (an HTTP status of 400-499 or 503, or a jobtrail
-- TransientError/PermanentError), so its intent is kept as 'refused' instead of being deleted —
-- explain and the dashboard can say so — and the next attempt calls again without asking
-- reconcile. Only an intent ('intent') left by a failure without such evidence is uncertain.
-- Numbered 21 to leave 20 to the workers' heartbeat table being written at the same time.
ALTER TABLE jobtrail_steps DROP CONSTRAINT jobtrail_steps_status_check;
ALTER TABLE jobtrail_steps ADD CONSTRAINT jobtrail_steps_status_check
    CHECK (status IN ('intent', 'confirmed', 'refused'));
