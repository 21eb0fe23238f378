"""Django's own task-framework tests (``tests/tasks/`` of the installed Django's release)
run against ``JobtrailBackend``: ``python tests/contrib_django/upstream/run.py``. Not a
pytest module: Django's runner runs them (see ``run.py``)."""
