"""The console e-mail backend, printing each message in one piece.

Django's console backend writes a message in three pieces, under a lock of its own instance, so
jobs sending mail on several worker threads at once can interleave their messages (and the
worker's log lines) on the console. This one writes each message with a single write.
"""

import io

from django.core.mail.backends import console


class EmailBackend(console.EmailBackend):
    def write_message(self, message):
        stream, self.stream = self.stream, io.StringIO()
        try:
            super().write_message(message)
            text = self.stream.getvalue()
        finally:
            self.stream = stream
        stream.write(text)
