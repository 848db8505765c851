from django.db import models


class Order(models.Model):
    """The baseline of the single-enqueue scenario: a bare ``Order.objects.create()`` in a
    transaction, the kind of row a web request writes anyway."""

    email = models.CharField(max_length=200)
    total = models.IntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.email
