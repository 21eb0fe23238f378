"""A minimal project on jobtrail's task backend. ``EXAMPLE_DATABASE`` picks the database:
``sqlite:///path.db`` (the default, ``example.db`` here) or ``postgresql://user@host:port/db``.
jobtrail keeps its tables in that same database, so a view's ``atomic()`` block covers the
row it saves and the task it enqueues."""

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "example-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "example.urls"
INSTALLED_APPS = [
    # the admin shows jobtrail's tasks read-only: /admin/jobtrail/task/ (docs/django.md)
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",  # the admin's CSS under runserver
    "jobtrail.contrib.django",
    "shop",
]
try:
    import django.tasks  # noqa: F401  (Django >= 6.0 has the task framework built in)
except ImportError:
    INSTALLED_APPS.insert(0, "django_tasks")  # the backport, on Django 5.2

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def _database(url: str) -> dict[str, object]:
    if url.startswith("sqlite:///"):
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": url[len("sqlite:///") :]}
    parts = urlsplit(url)
    options = {k: v[0] for k, v in parse_qs(parts.query).items()}
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
    }


DATABASES = {
    "default": _database(os.environ.get("EXAMPLE_DATABASE", f"sqlite:///{BASE_DIR / 'example.db'}"))
}
TASKS = {
    "default": {
        "BACKEND": "jobtrail.contrib.django.JobtrailBackend",
        "QUEUES": ["default"],
        "OPTIONS": {
            # jobtrail kind settings per task path
            "TASKS": {"shop.tasks.confirm_order": {"max_attempts": 3, "lease_seconds": 60}},
        },
    }
}
