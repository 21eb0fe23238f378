from django.db import models


class Note(models.Model):
    text = models.TextField()

    class Meta:
        app_label = "testapp"
