from tests.process.conftest import start_worker  # noqa: F401 - the real-worker fixture
