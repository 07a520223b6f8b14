"""`sfapprox datasets list|fetch|verify MANIFEST`: the entries of a manifest and their files; `sfapprox datasets
list` alone: the manifests shipped with sfapprox."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .._errors import ParameterError, spelled_for
from ..formats import Column, Table, printable
from . import _options as o
from ._app import EXIT_INCOMPLETE, HELP_MARKUP, HelpGroup, app, error_boundary
from ._render import check_outputs, emit, err, literal, say

datasets_app = typer.Typer(
    name="datasets",
    help="List, download and verify the matrices of a dataset manifest (a .toml file, or a bundled one's name: `sfapprox datasets list` names them).",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
)
app.add_typer(datasets_app)

_MANIFEST_HELP = "Dataset manifest: a .toml file, or a bundled one's name (`sfapprox datasets list` names them), e.g. paper-table1."
ManifestPath = Annotated[Path, typer.Argument(help=_MANIFEST_HELP, show_default=False, metavar="MANIFEST")]
DataDir = Annotated[Optional[Path], typer.Option("--data-dir", help="Folder searched first for the files (used and verified, nothing downloaded); it must exist.", metavar="DIR")]
Only = Annotated[Optional[str], typer.Option("--only", help="Comma-separated entry names (default: all).", metavar="NAMES")]


def typed_options():
    """The context of a datasets command's work: its messages name its own options as typed (``--data-dir
    DIR``), where sfapprox.datasets names the keywords (``data_dir='DIR'``) to a Python caller.  (The command
    itself reads a manifest's keys, the keywords; those messages are spelled so where they are made.)"""
    return spelled_for("cli")


def _source(entry) -> str:
    if entry.generator:
        params = ", ".join(f"{k}={v}" for k, v in entry.params.items())
        return f"{entry.generator}({params})"
    if entry.url:
        return entry.url + (f" → {entry.member}" if entry.member else "")
    return entry.homepage or "(local file)"


def _reference(entry) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in entry.reference.items())


def _status_table(title: str, rows: list[dict], columns: list[tuple[str, str]]):
    table = Table(title, [Column(key, name, "left") for key, name in columns])
    for row in rows:
        table.add({key: str(row.get(key) if row.get(key) is not None else "–") for key, _ in columns})
    return table


def _counts(rows: list[dict]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return ", ".join(f"{n} {status}" for status, n in counts.items())


@datasets_app.command("list")
@o.options(o.output_group("entries as JSON"))
def list_entries(
    manifest: Annotated[Optional[Path], typer.Argument(help=_MANIFEST_HELP + " Left out: the bundled manifests.",
                                                       show_default=False, metavar="MANIFEST")] = None,
    data_dir: DataDir = None,
    only: Only = None,
    verbose: Annotated[bool, o.flag("--verbose", "-v", help="Also show each entry's source (URL or generator); "
                                    "without a manifest, each manifest's description and file.")] = False,
    *,
    outputs,
) -> None:
    """Show a manifest's entries: category, status (present, missing, ...), file, reference figures.

    Without a manifest: the manifests shipped with sfapprox, one line each.

    Example: sfapprox datasets list paper-table1 --data-dir ../shared/realdata
    """
    with error_boundary(), typed_options():
        if manifest is None:
            _list_bundled(data_dir, only, verbose, outputs)
            return
        m, checked = _checked_entries(manifest, data_dir, only, outputs)
        rows = []
        for entry, status, _ in checked:
            rows.append({"name": entry.name, "category": entry.category, "status": status,
                         "file": entry.file or f"(generated: {entry.generator})", "source": _source(entry),
                         "reference": _reference(entry) or None, "reproducible": "✓" if entry.reproducible else ""})
        columns = [("name", "name"), ("category", "category"), ("status", "status"), ("file", "file"),
                   ("reference", "reference"), ("reproducible", "✓")]
        if verbose:
            columns.insert(4, ("source", "source"))
        table = _status_table(m.title or str(manifest), rows, columns)
        table.notes.append(_counts(rows) + (f"; reference figures: {m.reference_source}; ✓ = reproducible"
                                            if m.reference_source else ""))
        emit([table], {"manifest": str(manifest), "entries": rows}, outputs)


@datasets_app.command("fetch")
def fetch(manifest: ManifestPath, data_dir: DataDir = None, only: Only = None) -> None:
    """Download the entries' files into the cache (or find them in --data-dir) and verify them.

    One line per entry (✓ present, ✗ missing with the cause and where to put
    the file), then the counts.  Exit code 1 when some entry could not be
    fetched; entries already present stay usable (e.g. offline).

    Example: sfapprox datasets fetch paper-table1 --only scotland,ijcnn1
    """
    # here, not at the top: --help loads no numpy (tests/test_cli_terminal.py)
    from ..datasets import cache_dir, fetch_entry, load_manifest
    from ..datasets.fetch import ChecksumError, NetworkState, UnavailableError, check_data_dir

    with error_boundary(), typed_options():
        check_data_dir(data_dir)
        names = o.entry_names(only)
        m = load_manifest(manifest)
        network = NetworkState()
        counts = {"present": 0, "missing": 0, "bad checksum": 0}
        generated = 0
        for entry in m.select(names):
            if entry.generator:
                generated += 1
                continue
            try:
                with err.status(f"fetching {entry.name}"):
                    found = fetch_entry(entry, data_dir=data_dir, network=network)
            except ChecksumError as exc:
                counts["bad checksum"] += 1
                say(f"[red]✗[/] {literal(_one_line(exc))}")
                continue
            except UnavailableError as exc:
                counts["missing"] += 1
                say(f"[red]✗[/] {literal(_one_line(exc))}")
                continue
            counts["present"] += 1
            check = "sha256 ok" if found.verified else "no sha256 in the manifest"
            where = literal(str(found.path))
            say(f"[green]✓[/] {literal(entry.name)}: {where} ({found.origin}, {check})")
        summary = ", ".join(f"{n} {what}" for what, n in counts.items() if n or what != "bad checksum")
        if generated:
            summary += f" ({generated} generated, nothing to fetch)"
        say(f"{summary}; download cache: {literal(str(cache_dir()))}")
        if network.skipped:
            skipped = len(network.skipped)
            say(f"[yellow]{literal(network.down)}; skipped the downloads of {skipped:,} more "
                f"entr{'y' if skipped == 1 else 'ies'}[/]")
        if counts["missing"] or counts["bad checksum"]:
            raise typer.Exit(EXIT_INCOMPLETE)


def _list_bundled(data_dir: Path | None, only: str | None, verbose: bool, outputs) -> None:
    """The manifests shipped with sfapprox: name, entries, what they hold (``datasets list`` alone); with
    ``verbose``, their descriptions and files too (to copy one and edit it: ``-v`` was taken and did nothing)."""
    # here, not at the top: --help loads no numpy (tests/test_cli_terminal.py)
    from ..datasets import load_manifest
    from ..datasets.bundled import bundled_manifests

    given = [name for name, value in (("--data-dir", data_dir), ("--only", only)) if value is not None]
    if given:
        raise ParameterError(f"{' and '.join(given)} need{'s' if len(given) == 1 else ''} a manifest: "
                             "sfapprox datasets list MANIFEST (the bundled ones: sfapprox datasets list)")
    check_outputs(outputs)
    rows = []
    for name, path in bundled_manifests().items():
        m = load_manifest(path)
        rows.append({"name": name, "entries": len(m.entries), "title": m.title, "description": m.description,
                     "file": str(path)})
    columns = [Column("name", "name", "left"), Column("entries", "entries"), Column("title", "what", "left")]
    if verbose:
        columns += [Column("description", "description", "left"), Column("file", "file", "left")]
    table = Table("bundled dataset manifests", columns)
    for row in rows:
        table.add({**row, "entries": str(row["entries"]), "title": row["title"] or "–",
                   "description": row["description"] or "–"})
    # short, one command: at 80 columns the longer note broke "sfapprox batch NAME" across two lines
    table.notes.append("a name is taken wherever a manifest is: sfapprox batch synthetic")
    emit([table], {"manifests": rows}, outputs)


def _checked_entries(manifest: Path, data_dir: Path | None, only: str | None, outputs):
    """The manifest and, for each selected entry, its status and detail (every option checked first)."""
    # here, not at the top: --help loads no numpy (tests/test_cli_terminal.py)
    from ..datasets import load_manifest, verify_entry
    from ..datasets.bundled import locate_manifest
    from ..datasets.fetch import check_data_dir

    check_data_dir(data_dir)
    # --json MANIFEST --force replaced the manifest it listed (a bundled one's name: its file)
    check_outputs(outputs, inputs=[locate_manifest(manifest).path])
    names = o.entry_names(only)
    m = load_manifest(manifest)
    return m, [(entry, *verify_entry(entry, data_dir=data_dir)) for entry in m.select(names)]


def _one_line(exc: BaseException) -> str:
    """An error as one line, its control characters escaped (a path or URL in it is the user's or the
    manifest's spelling: an ESC in one reached the terminal raw)."""
    return printable(" ".join(str(exc).split()))


@datasets_app.command("verify")
@o.options(o.output_group("checks as JSON"))
def verify(manifest: ManifestPath, data_dir: DataDir = None, only: Only = None, *,
           outputs) -> None:
    """Check the SHA-256 of every file present (in --data-dir or the cache); downloads nothing.

    Exit code 1 on a checksum mismatch.

    Example: sfapprox datasets verify paper-table1 --data-dir ../shared/realdata
    """
    with error_boundary(), typed_options():
        _, checked = _checked_entries(manifest, data_dir, only, outputs)
        rows = [{"name": entry.name, "status": status, "detail": detail} for entry, status, detail in checked]
        table = _status_table(f"verify {manifest}", rows, [("name", "name"), ("status", "status"), ("detail", "detail")])
        table.notes.append(_counts(rows))
        emit([table], {"manifest": str(manifest), "entries": rows}, outputs)
        if any(row["status"] == "mismatch" for row in rows):
            raise typer.Exit(EXIT_INCOMPLETE)
