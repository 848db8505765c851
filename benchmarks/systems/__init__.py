"""One driver per system under test; each runs only inside its own virtualenv."""
