from django.db import models


class Note(models.Model):
    """What the site's job writes: a row the install check looks for."""

    text = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.text
