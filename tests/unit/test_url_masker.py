"""One URL masker (``jobtrail.model.urls.redact_url``) for every place a database URL is
printed or logged: the password in the user info, in a ``password=``/``sslpassword=`` query
parameter, and in a libpq keyword string. (Before, ``migrate``, ``doctor`` and
``SchemaMissing`` printed a ``?password=`` in clear: two maskers disagreed.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobtrail.model.errors import SchemaMissing
from jobtrail.model.urls import describe_url, redact_url

SECRET = "s3cr3t-PW"

CASES = [
    # (given, masked)
    (f"postgresql://app:{SECRET}@db:5432/jobs", "postgresql://app:***@db:5432/jobs"),
    (f"postgres://app:{SECRET}@db/jobs", "postgres://app:***@db/jobs"),
    (
        f"postgresql://app@db/jobs?password={SECRET}&sslmode=require",
        "postgresql://app@db/jobs?password=***&sslmode=require",
    ),
    (
        f"postgresql://db/jobs?sslpassword={SECRET}&application_name=a%20b",
        "postgresql://db/jobs?sslpassword=***&application_name=a%20b",
    ),
    (f"postgresql://db/jobs?PassWord={SECRET}", "postgresql://db/jobs?PassWord=***"),
    (f"postgresql://db/jobs?pass%77ord={SECRET}", "postgresql://db/jobs?pass%77ord=***"),
    # a port psycopg would refuse: the user info is masked all the same
    (f"postgresql://app:{SECRET}@db:notaport/jobs", "postgresql://app:***@db:notaport/jobs"),
    # a password with an unencoded "/" or "@"
    (f"postgresql://app:{SECRET}/x@y@db/jobs", "postgresql://app:***@db/jobs"),
    (f"host=db password={SECRET} dbname=jobs", "host=db password=*** dbname=jobs"),
    (
        f"host=db password = '{SECRET} \\' x' sslpassword={SECRET} user=app",
        "host=db password = *** sslpassword=*** user=app",
    ),
    # nothing secret: unchanged, byte for byte
    (
        "postgresql://app@db/jobs?options=-csearch_path%3Dx",
        "postgresql://app@db/jobs?options=-csearch_path%3Dx",
    ),
    ("sqlite:///jobtrail.db", "sqlite:///jobtrail.db"),
    ("host=db dbname=jobs", "host=db dbname=jobs"),
]


@pytest.mark.parametrize(("given", "masked"), CASES)
def test_every_password_is_masked(given: str, masked: str) -> None:
    assert redact_url(given) == masked
    assert redact_url(masked) == masked  # masking twice changes nothing
    assert SECRET not in describe_url(given)


@pytest.mark.parametrize(("given", "masked"), CASES[:10])
def test_schema_missing_prints_no_password(given: str, masked: str) -> None:
    error = SchemaMissing(given, "relation does not exist")
    assert SECRET not in str(error) and SECRET not in error.command
    assert error.url == masked
    assert error.command == f"jobtrail migrate --db {masked}"


def test_a_relative_sqlite_path_is_named_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    absolute = f"sqlite:///{os.path.join(str(tmp_path), 'app.db')}"
    assert describe_url("sqlite:///app.db") == absolute
    assert describe_url(absolute) == absolute
    error = SchemaMissing("sqlite:///app.db", "no database file")
    assert error.command == f"jobtrail migrate --db {absolute}"
