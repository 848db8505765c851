"""Durations as short text, for the admin and the command line."""


def seconds_text(seconds, *, coarse=False) -> str:
    """A short duration: 850 ms, 4.2 s, 3 m 05 s, 2 h 13 m, 3 d 4 h. Coarse, for lists: whole
    seconds under a minute, then whole minutes under an hour (34 s, 3 m, 2 h 13 m)."""
    if seconds is None:
        return "-"
    seconds = float(seconds)
    if seconds < 0:
        seconds = 0.0
    if coarse and seconds < 3600:
        return f"{seconds:.0f} s" if seconds < 60 else f"{seconds // 60:.0f} m"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} m {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} m"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"
