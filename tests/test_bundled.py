"""The bundled manifests: shipped inside the package, given by name, a clone's old path still leads to them."""

from __future__ import annotations

import os
from pathlib import Path

from sfapprox.datasets.bundled import OLD_FOLDER, bundled_manifests, locate_manifest

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = ROOT / "sfapprox" / "datasets" / "manifests"


def test_the_bundled_manifests_lie_in_the_package_and_nowhere_else():
    """One copy of each (two could drift): in the package, which a wheel carries; none left in the clone's old
    folder, whose schema README stays."""
    found = bundled_manifests()
    assert sorted(found) == ["kernels", "paper-table1", "synthetic"]
    assert all(path.parent == PACKAGED and path.is_file() for path in found.values())
    assert not list((ROOT / OLD_FOLDER).glob("*.toml")) and (ROOT / OLD_FOLDER / "README.md").is_file()


def test_a_bare_name_with_or_without_toml_is_the_bundled_manifest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for given in ("synthetic", "synthetic.toml"):
        located = locate_manifest(given)
        assert located.path == PACKAGED / "synthetic.toml"
        assert located.shown == given and located.moved is None and located.folders == ()


def test_a_file_that_exists_wins_over_the_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for given in ("synthetic", "synthetic.toml"):
        (tmp_path / given).write_text("# mine\n")
        assert locate_manifest(given).path == Path(given)
    # an old path's file still there (a clone of its own, a user's copy) is read as it is, with no note
    mine = tmp_path / OLD_FOLDER / "kernels.toml"
    mine.parent.mkdir()
    mine.write_text("# mine\n")
    assert locate_manifest(mine).path == mine and locate_manifest(mine).moved is None


def test_a_folder_named_as_a_bundled_manifest_is_no_manifest(tmp_path, monkeypatch):
    """`batch synthetic --out-dir synthetic`: its second run found the output folder where the name was."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "synthetic").mkdir()
    assert locate_manifest("synthetic").path == PACKAGED / "synthetic.toml"
    # a path with a folder part is a path: left for the reader to refuse as a folder
    assert locate_manifest(f".{os.sep}synthetic").path == Path(f".{os.sep}synthetic")


def test_an_old_clone_path_leads_to_the_bundled_manifest_with_a_note(tmp_path):
    """README and users' scripts named data_manifests/<name>.toml: it still works, named by its new name
    (the hints made from it give that one), and its folder is still searched for the entries' files."""
    old = tmp_path / "clone" / OLD_FOLDER
    gone = locate_manifest(old / "paper-table1.toml")  # no such folder: a wheel user running README's line
    assert gone.path == PACKAGED / "paper-table1.toml" and gone.shown == "paper-table1" and gone.folders == ()
    assert gone.moved.startswith(f"{old / 'paper-table1.toml'}: ") and "deprecated" in gone.moved
    assert "give the name paper-table1" in gone.moved and "\n" not in gone.moved
    old.mkdir(parents=True)
    kept = locate_manifest(os.path.relpath(old / "kernels.toml"))
    assert kept.path == PACKAGED / "kernels.toml" and kept.folders == (str(old),)


def test_other_missing_paths_are_left_as_given(tmp_path):
    for given in (tmp_path / "synthetic.toml", tmp_path / OLD_FOLDER / "mine.toml", "nosuch", "data_manifests"):
        located = locate_manifest(given)
        assert located.path == Path(given) and located.shown == os.fspath(given) and located.moved is None
