"""Progress of a long command-line operation: one line updated in place on a terminal, or a few
percentage steps (25%, 50%, 75%) when the output goes to a file or a log, where a line per
batch would be a thousand lines for a million rows."""

STEPS = (25, 50, 75)


class Progress:
    def __init__(self, out, total: int, *, verb: str, noun: str = "job(s)"):
        self.out = out  # a management command's OutputWrapper
        self.total = total
        self.verb = verb
        self.noun = noun
        self.interactive = out.isatty()
        self._next_step = 0  # index into STEPS

    def update(self, done: int) -> None:
        if not self.total or done >= self.total:
            return  # the command prints its own final line
        percent = 100 * done // self.total
        if self.interactive:
            self.out.write(f"\r  {self.verb} {done}/{self.total} {self.noun} ({percent}%)",
                           ending="")
            self.out.flush()
            return
        if self._next_step < len(STEPS) and percent >= STEPS[self._next_step]:
            while self._next_step < len(STEPS) and percent >= STEPS[self._next_step]:
                self._next_step += 1  # one line, however many steps one batch passed
            self.out.write(f"  {self.verb} {done}/{self.total} {self.noun} ({percent}%)")

    def finish(self) -> None:
        """End the updated line, so that the next output starts on a line of its own."""
        if self.interactive:
            self.out.write("\r\033[K", ending="")
