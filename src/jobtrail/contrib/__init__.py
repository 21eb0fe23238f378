"""Integrations with other frameworks (entry floor): ``jobtrail.contrib.django``."""
