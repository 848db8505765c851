"""The demo's e-mail backend: one line per message on the console.

Django's console backend prints each message whole (headers, body: a dozen lines), which buried
the demo's story under raw e-mail; it also writes a message in three pieces, so messages sent on
several worker threads at once could interleave. This one writes one line per message, in a
single write.
"""

from django.core.mail.backends import console


class EmailBackend(console.EmailBackend):
    def write_message(self, message):
        recipients = ", ".join(message.recipients())
        self.stream.write(f"  [mail] to {recipients}: {message.subject}\n")
