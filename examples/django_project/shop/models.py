from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)
    confirmation = models.CharField(max_length=100, blank=True)
    task_id = models.CharField(max_length=32, blank=True)
