"""Behavioural conformance suite: every test runs on SQLite and on PostgreSQL."""
