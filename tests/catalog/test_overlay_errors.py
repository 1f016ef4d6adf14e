"""A broken refresh overlay is a clear input error for every command, never a traceback."""

from trainstack.catalog import loader
from trainstack.cli import main


def test_broken_overlay_file_exits_2_naming_the_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "cn-shenzhen.json").write_text("{broken")
    monkeypatch.setenv(loader.OVERLAY_DIR_ENV, str(tmp_path))
    loader._cached.cache_clear()
    try:
        assert main(["catalog"]) == 2
        err = capsys.readouterr().err
        assert "cn-shenzhen.json" in err and "Traceback" not in err
    finally:
        loader._cached.cache_clear()
