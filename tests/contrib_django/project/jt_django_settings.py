"""Settings of the Django project the integration tests drive (both databases at once: the
SQLite file and a PostgreSQL schema named by the environment, one task backend for each)."""

import os

SECRET_KEY = "tests-only"
# DEBUG on: Django's own console handler writes django.* records too (test_contract.py)
DEBUG = os.environ.get("JT_DJ_DEBUG") == "1"
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "jobtrail.contrib.django",
    "testapp",
]
try:
    import django.tasks  # noqa: F401  (Django >= 6.0: built in)
except ImportError:
    INSTALLED_APPS.insert(0, "django_tasks")

# the admin (jobtrail's read-only task pages: tests/contrib_django/test_admin.py)
ROOT_URLCONF = "jt_django_urls"
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
ALLOWED_HOSTS = ["testserver"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["JT_DJ_SQLITE"],
    },
    "pg": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("JT_DJ_PG_NAME", "test"),
        "USER": os.environ.get("JT_DJ_PG_USER", "postgres"),
        "HOST": os.environ.get("JT_DJ_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("JT_DJ_PG_PORT", "5432"),
        "OPTIONS": {"options": f"-c search_path={os.environ.get('JT_DJ_PG_SCHEMA', 'public')}"},
    },
}
_OPTIONS = {
    "TASKS": {
        "testapp.tasks.fail": {"max_attempts": 2, "backoff_base": 0},
        "testapp.tasks.fail_permanently": {"max_attempts": 5},
        "testapp.tasks.fail_unclassified": {"max_attempts": 5, "retry_unclassified": False},
        "testapp.tasks.fail_over_budget": {"max_attempts": 5, "max_elapsed": 0.001},
    }
}
QUEUES = ["default", "other", "spare", "hang"]
TASKS = {
    "default": {
        "BACKEND": "jobtrail.contrib.django.JobtrailBackend",
        "QUEUES": QUEUES,
        "OPTIONS": {"DATABASE": "default", **_OPTIONS},
    },
    "pg": {
        "BACKEND": "jobtrail.contrib.django.JobtrailBackend",
        "QUEUES": QUEUES,
        "OPTIONS": {"DATABASE": "pg", **_OPTIONS},
    },
    # jobtrail's tables in a database of their own: enqueues commit on their own
    "separate": {
        "BACKEND": "jobtrail.contrib.django.JobtrailBackend",
        "QUEUES": QUEUES,
        "OPTIONS": {"DATABASE_URL": f"sqlite:///{os.environ['JT_DJ_SQLITE']}.separate", **_OPTIONS},
    },
    "separate_pg": {
        "BACKEND": "jobtrail.contrib.django.JobtrailBackend",
        "QUEUES": QUEUES,
        "OPTIONS": {"DATABASE_URL": os.environ["JT_DJ_PG_SEPARATE_URL"], **_OPTIONS},
    },
}
if os.environ.get("JT_DJ_FRESH_URL"):  # a store without jobtrail's schema (test_contract.py)
    TASKS["fresh"] = {
        "BACKEND": "jobtrail.contrib.django.JobtrailBackend",
        "OPTIONS": {"DATABASE_URL": os.environ["JT_DJ_FRESH_URL"]},
    }
