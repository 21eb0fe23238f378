"""The core: what happens to a task, decided and written.

``decide`` holds the pure decisions, ``transition`` the one path that writes a task's state,
``context`` the handler's ``ctx``, ``explain`` and ``explain_facts`` the narratives, ``workflow``
the parent/child rules and ``payloads`` the encoding of what is stored. Below: ``jobtrail.store``
and ``jobtrail.model``; above: ``jobtrail.services``, ``jobtrail.worker``, ``jobtrail.app``.
"""
