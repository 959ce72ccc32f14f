"""Every test runs with its own profile folder and results store, never the user's."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_user_files(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("SHAPEWISE_PROFILES", str(home / "profiles"))
    monkeypatch.setenv("SHAPEWISE_DB", str(home / "results.db"))


def pytest_terminal_summary(terminalreporter):
    """How many commands the robustness suites ran (the fuzz suites generate most of them)."""
    fuzzing = __import__("sys").modules.get("fuzzing")
    if fuzzing is not None and fuzzing.COMMANDS_RUN[0]:
        terminalreporter.write_line(f"robustness suites: {fuzzing.COMMANDS_RUN[0]} commands run")
