"""`sfapprox datasets list|fetch|verify MANIFEST`: the entries of a manifest and their files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ._app import app, error_boundary
from ._render import err, out

datasets_app = typer.Typer(
    name="datasets",
    help="List, download and verify the matrices of a dataset manifest (data_manifests/*.toml).",
    no_args_is_help=True,
)
app.add_typer(datasets_app)

ManifestPath = Annotated[Path, typer.Argument(help="Dataset manifest (.toml), e.g. data_manifests/paper-table1.toml.", show_default=False)]
DataDir = Annotated[Optional[Path], typer.Option("--data-dir", help="Folder searched first for the files (used and verified, nothing downloaded).")]
Only = Annotated[Optional[str], typer.Option("--only", help="Comma-separated entry names (default: all).")]

_STYLE = {"ok": "green", "unchecked": "yellow", "generated": "cyan", "downloaded": "green", "found": "green",
          "missing": "red", "mismatch": "bold red", "unavailable": "red"}


def _names(only: str | None) -> list[str] | None:
    return [n.strip() for n in only.split(",") if n.strip()] if only else None


def _source(entry) -> str:
    if entry.generator:
        params = ", ".join(f"{k}={v}" for k, v in entry.params.items())
        return f"{entry.generator}({params})"
    if entry.url:
        return entry.url + (f" → {entry.member}" if entry.member else "")
    return entry.homepage or "(local file)"


def _reference(entry) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in entry.reference.items())


@datasets_app.command("list")
def list_entries(manifest: ManifestPath, data_dir: DataDir = None, only: Only = None) -> None:
    """Show a manifest's entries: category, source, file, status, reference figures.

    Example: sfapprox datasets list data_manifests/paper-table1.toml --data-dir ../shared/realdata
    """
    from ..datasets import load_manifest, verify_entry

    with error_boundary():
        m = load_manifest(manifest)
        table = Table(title=m.title or str(manifest))
        for col in ("name", "category", "file", "source", "status", "reference", "✓"):
            table.add_column(col, overflow="fold", no_wrap=col in ("name", "status", "✓"))
        for entry in m.select(_names(only)):
            status, _ = verify_entry(entry, data_dir=data_dir)
            table.add_row(entry.name, entry.category, entry.file or "–", _source(entry),
                          f"[{_STYLE.get(status, '')}]{status}[/]", _reference(entry), "✓" if entry.reproducible else "")
        out.print(table)
        if m.reference_source:
            err.print(f"reference figures: {m.reference_source}; ✓ = reproducible", highlight=False)


@datasets_app.command("fetch")
def fetch(manifest: ManifestPath, data_dir: DataDir = None, only: Only = None) -> None:
    """Download the entries' files into the cache (or find them in --data-dir) and verify them.

    One line per entry (✓ present, ✗ missing with the cause and where to put
    the file), then the counts.  Exit code 1 when some entry could not be
    fetched; entries already present stay usable (e.g. offline).

    Example: sfapprox datasets fetch data_manifests/paper-table1.toml --only scotland,ijcnn1
    """
    from ..datasets import cache_dir, fetch_entry, load_manifest
    from ..datasets.fetch import ChecksumError, UnavailableError

    with error_boundary():
        m = load_manifest(manifest)
        counts = {"present": 0, "missing": 0, "bad checksum": 0}
        generated = 0
        for entry in m.select(_names(only)):
            if entry.generator:
                generated += 1
                continue
            try:
                with err.status(f"fetching {entry.name}"):
                    found = fetch_entry(entry, data_dir=data_dir)
            except ChecksumError as exc:
                counts["bad checksum"] += 1
                err.print(f"[red]✗[/] {escape(_one_line(exc))}", highlight=False, soft_wrap=True)
                continue
            except UnavailableError as exc:
                counts["missing"] += 1
                err.print(f"[red]✗[/] {escape(_one_line(exc))}", highlight=False, soft_wrap=True)
                continue
            counts["present"] += 1
            check = "sha256 ok" if found.verified else "no sha256 in the manifest"
            err.print(f"[green]✓[/] {escape(entry.name)}: {escape(str(found.path))} ({found.origin}, {check})",
                      highlight=False, soft_wrap=True)
        summary = ", ".join(f"{n} {what}" for what, n in counts.items() if n or what != "bad checksum")
        if generated:
            summary += f" ({generated} generated, nothing to fetch)"
        err.print(f"{summary}; download cache: {escape(str(cache_dir()))}", highlight=False, soft_wrap=True)
        if counts["missing"] or counts["bad checksum"]:
            raise typer.Exit(1)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


@datasets_app.command("verify")
def verify(manifest: ManifestPath, data_dir: DataDir = None, only: Only = None) -> None:
    """Check the SHA-256 of every file present (in --data-dir or the cache); downloads nothing.

    Exit code 1 on a checksum mismatch.

    Example: sfapprox datasets verify data_manifests/paper-table1.toml --data-dir ../shared/realdata
    """
    from ..datasets import load_manifest, verify_entry

    with error_boundary():
        m = load_manifest(manifest)
        table = Table(title=f"verify {manifest}")
        for col in ("name", "status", "detail"):
            table.add_column(col, overflow="fold", no_wrap=col != "detail")
        counts: dict[str, int] = {}
        for entry in m.select(_names(only)):
            status, detail = verify_entry(entry, data_dir=data_dir)
            counts[status] = counts.get(status, 0) + 1
            table.add_row(entry.name, f"[{_STYLE.get(status, '')}]{status}[/]", detail)
        out.print(table)
        err.print(", ".join(f"{n} {s}" for s, n in counts.items()), highlight=False)
        if counts.get("mismatch"):
            raise typer.Exit(1)
