"""The manifests shipped inside sfapprox, and the manifest a user names: a path, or a bundled one's name.

The manifests live in the package (``sfapprox/datasets/manifests/*.toml``), so an installed wheel has
them; wherever a manifest is taken, its bare name (``paper-table1``, ``synthetic``, ``kernels``) names
one.  :func:`locate_manifest` decides, in order:

1. a file at the path given is that manifest (a user's ``synthetic.toml`` in the current folder wins);
2. a bare name (no folder part), with or without ``.toml``, of a bundled manifest is that one;
3. a clone's old path, ``data_manifests/<name>.toml`` (README and scripts named it until the manifests
   moved into the package), is the bundled one, with a deprecation note: the run goes on;
4. anything else is left as given, for the reader to refuse ("no such manifest file").

A bundled manifest's download cache is the one its old path had: the cache folder is named after the
manifest's file name (:func:`~sfapprox.datasets.fetch.cache_folder_name`), which the move kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OLD_FOLDER", "ManifestFile", "bundled_manifests", "locate_manifest"]

#: The clone's folder the manifests lay in before they moved into the package.
OLD_FOLDER = "data_manifests"

# the package's own files (an installed sfapprox is a folder of files, never a zip: a manifest's
# entries look for their files beside it, which needs a real folder)
_FOLDER = Path(__file__).resolve().parent / "manifests"


@dataclass(frozen=True)
class ManifestFile:
    """Where a manifest named by a user lies, and how messages name it.

    Attributes
    ----------
    path : pathlib.Path
        The file to read (it may not exist: the reader refuses it then).
    shown : str
        The manifest's name in messages and records: the path as given, or a bundled manifest's name
        when an old ``data_manifests/`` path led to it (the hints made from it then give the new one).
    folders : tuple of str
        Folders searched for the entries' files before the manifest's own: an old path's folder, where
        a clone's user may have put files beside the manifest (empty otherwise).
    moved : str or None
        The deprecation note, when an old ``data_manifests/`` path was given for a bundled manifest.
    """

    path: Path
    shown: str
    folders: tuple[str, ...] = ()
    moved: str | None = None


def bundled_manifests() -> dict[str, Path]:
    """The manifests shipped with sfapprox, by name, sorted.

    Returns
    -------
    dict of str to pathlib.Path
        Name (the file name without ``.toml``) -> the file.

    Examples
    --------
    >>> sorted(bundled_manifests())
    ['kernels', 'paper-table1', 'synthetic']
    """
    return {path.stem: path for path in sorted(_FOLDER.glob("*.toml"))}


def locate_manifest(given: str | os.PathLike) -> ManifestFile:
    """The manifest a user named: an existing file, a bundled manifest's name, or a clone's old path.

    Parameters
    ----------
    given : str or os.PathLike
        A manifest path, or the name of a bundled manifest (``"synthetic"`` or ``"synthetic.toml"``).

    Returns
    -------
    ManifestFile
        ``moved`` is set for an old ``data_manifests/<name>.toml`` path that no longer exists.

    Examples
    --------
    >>> locate_manifest("synthetic").path.name
    'synthetic.toml'
    >>> located = locate_manifest("no/such/data_manifests/kernels.toml")
    >>> located.path.name, located.shown
    ('kernels.toml', 'kernels')
    """
    shown = os.fspath(given)
    path = Path(given)
    if path.is_file() or path.is_symlink():  # (a link that loops or dangles: named as one when it is read)
        return ManifestFile(path, shown)
    bundled = bundled_manifests()
    stem = path.name[: -len(".toml")] if path.name.lower().endswith(".toml") else path.name
    if stem not in bundled:
        return ManifestFile(path, shown)
    if not any(sep in shown for sep in {"/", os.sep}):
        # a bare name, even where a folder of that name lies here (a batch's --out-dir named after its
        # manifest): a folder is no manifest, and refusing it stopped every second run
        return ManifestFile(bundled[stem], shown)
    if path.parent.name == OLD_FOLDER and path.suffix.lower() == ".toml":
        old = path.parent
        folders = (os.path.abspath(old),) if old.is_dir() else ()
        moved = (f"{shown}: the dataset manifests moved into the sfapprox package; this path is deprecated and will "
                 f"stop working in a later release: give the name {stem} (the bundled manifest, used now)")
        return ManifestFile(bundled[stem], stem, folders, moved)
    return ManifestFile(path, shown)
