"""The model: the state machine as data (``machine``, the bottom floor, importing nothing of
ours), the errors, the value records (``models``), kind settings, input validation, time parsing
and the message catalog (``i18n``). Everything else in jobtrail imports from here."""
