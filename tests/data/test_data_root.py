import pathlib

from pfzoo.data import resolve_data_root


def test_explicit_argument_wins_over_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PFZOO_DATA", str(tmp_path / "from_env"))
    assert resolve_data_root(tmp_path / "explicit") == tmp_path / "explicit"
    assert resolve_data_root(str(tmp_path / "explicit")) == tmp_path / "explicit"


def test_env_var_used_when_no_argument(monkeypatch, tmp_path):
    monkeypatch.setenv("PFZOO_DATA", str(tmp_path / "from_env"))
    assert resolve_data_root(None) == tmp_path / "from_env"


def test_default_under_home_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("PFZOO_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_data_root(None) == tmp_path / ".cache" / "pfzoo" / "data"
    monkeypatch.setenv("PFZOO_DATA", "")  # an empty variable counts as unset
    assert resolve_data_root(None) == tmp_path / ".cache" / "pfzoo" / "data"


def test_expands_user_and_does_not_require_existence(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    root = resolve_data_root("~/nowhere/data")
    assert isinstance(root, pathlib.Path)
    assert root == tmp_path / "nowhere" / "data"
    assert not root.exists()
    monkeypatch.setenv("PFZOO_DATA", "~/via_env")
    assert resolve_data_root(None) == tmp_path / "via_env"
