"""Every test runs with its own profile folder and results store, never the user's."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_user_files(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("SHAPEWISE_PROFILES", str(home / "profiles"))
    monkeypatch.setenv("SHAPEWISE_DB", str(home / "results.db"))
