"""Downloads through pooch from a local HTTP server, checksums, --data-dir, safe archive extraction."""

from __future__ import annotations

import bz2
import functools
import gzip
import hashlib
import http.server
import io
import os
import re
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from sfapprox import InputError
from sfapprox.datasets.fetch import (
    ChecksumError,
    UnavailableError,
    check_archive_members,
    extract_member,
    fetch_entry,
    verify_entry,
)
from sfapprox.datasets.manifest import load_manifest

STRIKE = b"*Vertices 3\n1 \"a\"\n2 \"b\"\n3 \"c\"\n*Edges\n1 2\n2 3\n"
SHA = hashlib.sha256(STRIKE).hexdigest()


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test output clean
        pass


@pytest.fixture
def server(tmp_path, request):
    """An HTTP server on 127.0.0.1 serving tmp_path/www; yields (base_url, folder, request log).

    Parametrized indirectly with ``{suffix: how}``, it sends the files whose names end in ``suffix`` with
    ``Content-Encoding: gzip``: ``"label"`` sends the file as it is (a server that labels a ``.gz`` file so,
    a common misconfiguration), ``"compress"`` gzip-compresses it on the way (as HTTP means it)."""
    www = tmp_path / "www"
    www.mkdir()
    requests: list[str] = []
    encoded = getattr(request, "param", {})

    class Logged(_Handler):
        def do_GET(self):
            requests.append(self.path)
            how = next((how for suffix, how in encoded.items() if self.path.endswith(suffix)), None)
            if how is None:
                return super().do_GET()
            body = (www / self.path.lstrip("/")).read_bytes()
            body = gzip.compress(body) if how == "compress" else body
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Logged, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", www, requests
    finally:
        httpd.shutdown()
        httpd.server_close()


def manifest(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "m.toml"
    path.write_text('[[matrix]]\nname = "strike"\ncategory = "network"\n' + body, encoding="utf-8")
    return path


def entry(tmp_path: Path, body: str):
    return load_manifest(manifest(tmp_path, body)).entries[0]


# ------------------------------------------------------------------ downloads


def test_download_verifies_and_is_cached(tmp_path, server):
    base, www, requests = server
    (www / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj"\nsha256 = "{SHA}"\n')
    cache = tmp_path / "cache"
    got = fetch_entry(e, cache=cache)
    assert got.origin == "download" and got.verified
    assert got.path == cache / "m" / "pajek" / "strike.paj"
    assert got.path.read_bytes() == STRIKE
    again = fetch_entry(e, cache=cache)
    assert again.origin == "cache" and again.verified
    assert requests == ["/strike.paj"]  # the second call did not download


def test_a_download_leaves_the_callers_pooch_logger_as_it_was(tmp_path, server):
    """The download quieted pooch's "Downloading ..." notes by setting its logger to WARNING for good: a
    caller who had it on DEBUG (to see its requests) found it silenced after the first fetch."""
    import logging

    import pooch

    base, www, _ = server
    (www / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj"\nsha256 = "{SHA}"\n')
    log = pooch.get_logger()
    level = log.level
    log.setLevel(logging.DEBUG)
    try:
        assert fetch_entry(e, cache=tmp_path / "cache").origin == "download"
        assert log.level == logging.DEBUG
    finally:
        log.setLevel(level)


def test_a_download_says_nothing_through_pooch_s_logger(tmp_path, server):
    """pooch's "Downloading data from ..." note reached stderr in every download (``sfapprox datasets
    fetch``, ``batch``): the quieting set ``logging.getLogger("pooch")``, which is not pooch's logger
    (``pooch.get_logger()`` is a ``logging.Logger`` made outside logging's registry)."""
    import logging

    import pooch

    base, www, _ = server
    (www / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj"\nsha256 = "{SHA}"\n')
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    pooch.get_logger().addHandler(handler)
    try:
        assert fetch_entry(e, cache=tmp_path / "cache").origin == "download"
    finally:
        pooch.get_logger().removeHandler(handler)
    assert not [r.getMessage() for r in records if r.levelno < logging.WARNING]


def test_a_download_works_with_a_pooch_without_a_default_timeout(tmp_path, server, monkeypatch):
    """pyproject allows pooch 1.7, whose ``pooch.downloaders`` has no ``DEFAULT_TIMEOUT`` (1.8 added it):
    importing it made every download an ImportError, reported as "download ... failed"."""
    import pooch.downloaders

    monkeypatch.delattr(pooch.downloaders, "DEFAULT_TIMEOUT", raising=False)  # as pooch 1.7 has it
    base, www, requests = server
    (www / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj"\nsha256 = "{SHA}"\n')
    got = fetch_entry(e, cache=tmp_path / "cache")
    assert got.origin == "download" and got.verified and got.path.read_bytes() == STRIKE


def test_wrong_checksum_is_refused_and_nothing_is_kept(tmp_path, server):
    base, www, _ = server
    (www / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj"\nsha256 = "{"0" * 64}"\n')
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError, match=r"m\.toml: entry 'strike': download from http://127\.0\.0\.1.*hash"):
        fetch_entry(e, cache=cache)
    assert not (cache / "m" / "pajek" / "strike.paj").exists()
    assert not list((cache / "m" / ".downloads").iterdir())


def test_wrong_checksum_after_decompression(tmp_path, server):
    base, www, _ = server
    (www / "strike.paj.bz2").write_bytes(bz2.compress(STRIKE))
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj.bz2"\nsha256 = "{"1" * 64}"\n')
    with pytest.raises(ChecksumError, match=f"SHA-256 mismatch \\(expected {'1' * 64}, got {SHA}\\)"):
        fetch_entry(e, cache=tmp_path / "cache")
    assert not (tmp_path / "cache" / "m" / "pajek" / "strike.paj").exists()


def test_compressed_download_is_decompressed(tmp_path, server):
    base, www, _ = server
    (www / "strike.paj.bz2").write_bytes(bz2.compress(STRIKE))
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj.bz2"\nsha256 = "{SHA}"\n')
    got = fetch_entry(e, cache=tmp_path / "cache")
    assert got.path.read_bytes() == STRIKE and got.verified


@pytest.mark.parametrize("server", [{".gz": "label", ".tgz": "label"}], indirect=True)
@pytest.mark.parametrize("url_file, file, member", [
    ("strike.paj.gz", "pajek/strike.paj", None),  # decompressed
    ("strike.paj.gz", "pajek/strike.paj.gz", None),  # kept compressed, its sha256 the .gz file's
    ("x.tgz", "pajek/strike.paj", "x/strike.paj"),  # extracted
], ids=["decompressed", "kept-compressed", "archive-member"])
def test_a_gz_file_labelled_content_encoding_gzip_is_the_file_the_url_names(tmp_path, server, url_file, file, member):
    """A server that sends a .gz file with "Content-Encoding: gzip" (as it is: the label is wrong) had requests
    decompress it on the way: the download kept as the .gz file was its content (its sha256 refused), and the
    one to decompress was "not a complete, valid .gz file"."""
    base, www, _ = server
    gz = gzip.compress(STRIKE)
    if member is None:
        (www / url_file).write_bytes(gz)
    else:
        (www / url_file).write_bytes(make_tar(tmp_path / url_file, {member: STRIKE}).read_bytes())
    wanted = gz if file.endswith(".gz") else STRIKE
    e = entry(tmp_path, f'file = "{file}"\nurl = "{base}/{url_file}"\nsha256 = "{hashlib.sha256(wanted).hexdigest()}"\n'
              + (f'member = "{member}"\n' if member else ""))
    got = fetch_entry(e, cache=tmp_path / "cache")
    assert got.origin == "download" and got.verified and got.path.read_bytes() == wanted


@pytest.mark.parametrize("server", [{".paj": "compress", ".gz": "compress"}], indirect=True)
@pytest.mark.parametrize("url_file", ["strike.paj", "strike.paj.gz"])
def test_a_file_compressed_on_the_way_is_kept_as_the_file_the_url_names(tmp_path, server, url_file):
    """Content-Encoding as HTTP means it (compressed for the way only; a .gz file compressed once more):
    the file is what is left once the encoding is undone."""
    base, www, _ = server
    (www / url_file).write_bytes(gzip.compress(STRIKE) if url_file.endswith(".gz") else STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/{url_file}"\nsha256 = "{SHA}"\n')
    assert fetch_entry(e, cache=tmp_path / "cache").path.read_bytes() == STRIKE


def test_failed_download_says_where_to_put_the_file(tmp_path, server):
    base, _, _ = server
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/missing.paj"\n')
    with pytest.raises(UnavailableError) as info:
        fetch_entry(e, data_dir=tmp_path / "data", cache=tmp_path / "cache")
    msg = str(info.value)
    assert "entry 'strike': file 'pajek/strike.paj' not found" in msg
    assert f"download from {base}/missing.paj failed (HTTP 404 " in msg
    assert f"put it at {tmp_path / 'data' / 'pajek' / 'strike.paj'}" in msg


def test_no_url_no_file(tmp_path):
    """Where to put the file names the setting as its reader gives it: fetch_entry's keyword to a Python
    caller (who was told to pass --data-dir), the option on the command line."""
    from sfapprox._errors import spelled_for

    e = entry(tmp_path, 'file = "pajek/strike.paj"\nhomepage = "http://example.org/strike"\n')
    with pytest.raises(UnavailableError, match=r"put it at DATA_DIR/pajek/strike.paj and pass data_dir='DATA_DIR'; "
                                               r"it is available from http://example.org/strike"):
        fetch_entry(e, cache=tmp_path / "cache")
    status, detail = verify_entry(e, cache=tmp_path / "cache")
    assert status == "missing" and "and pass data_dir='DATA_DIR';" in detail
    with spelled_for("cli"), pytest.raises(UnavailableError, match=r"and pass --data-dir DATA_DIR; it is available"):
        fetch_entry(e, cache=tmp_path / "cache")


# ------------------------------------------------------------------ --data-dir


def test_data_dir_file_is_used_and_verified_without_download(tmp_path, server):
    base, _, requests = server
    data = tmp_path / "data"
    (data / "pajek").mkdir(parents=True)
    (data / "pajek" / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj"\nsha256 = "{SHA}"\n')
    got = fetch_entry(e, data_dir=data, cache=tmp_path / "cache")
    assert (got.origin, got.verified, got.path) == ("data-dir", True, data / "pajek" / "strike.paj")
    assert requests == []
    assert verify_entry(e, data_dir=data, cache=tmp_path / "cache")[0] == "ok"


def test_data_dir_file_with_wrong_hash_is_an_error(tmp_path):
    data = tmp_path / "data"
    (data / "pajek").mkdir(parents=True)
    (data / "pajek" / "strike.paj").write_bytes(STRIKE + b"2 1\n")
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nsha256 = "{SHA}"\n')
    with pytest.raises(ChecksumError, match=r"entry 'strike': .*strike\.paj: SHA-256 mismatch \(expected "):
        fetch_entry(e, data_dir=data, cache=tmp_path / "cache")
    status, detail = verify_entry(e, data_dir=data, cache=tmp_path / "cache")
    assert status == "mismatch" and "SHA-256 mismatch" in detail


def test_file_without_hash_is_unchecked(tmp_path):
    data = tmp_path / "data"
    (data / "pajek").mkdir(parents=True)
    (data / "pajek" / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, 'file = "pajek/strike.paj"\n')
    assert fetch_entry(e, data_dir=data, cache=tmp_path / "cache").verified is False
    assert verify_entry(e, data_dir=data, cache=tmp_path / "cache")[0] == "unchecked"


def test_a_data_dir_must_be_a_folder(tmp_path):
    from sfapprox.datasets.fetch import check_data_dir

    from sfapprox._errors import spelled_for

    assert check_data_dir(None) is None and check_data_dir(tmp_path) == tmp_path
    # the keyword as a Python caller passes it, the option as the command line's user types it
    with pytest.raises(InputError, match=r"^data_dir='\.\./shared/nope': no such folder; point it at the folder that "
                                         r"holds the manifest's files, or leave it out to download them into the cache$"):
        check_data_dir("../shared/nope")
    with spelled_for("cli"), pytest.raises(InputError, match=r"^--data-dir \.\./shared/nope: no such folder; "):
        check_data_dir("../shared/nope")
    with pytest.raises(InputError, match=r"^--data-dir \.\./shared/nope: no such folder; "):
        check_data_dir("../shared/nope", name="--data-dir")  # a caller's own name for it, as before
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match=r"^data_dir='.*file': not a folder; point it at"):
        check_data_dir(tmp_path / "file")


@pytest.mark.parametrize("command", ["list", "fetch", "verify"])
def test_datasets_commands_refuse_a_data_dir_that_is_no_folder(tmp_path, command):
    from typer.testing import CliRunner

    from sfapprox.cli import app

    m = manifest(tmp_path, 'file = "pajek/strike.paj"\nurl = "http://127.0.0.1:9/strike.paj"\n')
    missing = tmp_path / "no" / "such"
    result = CliRunner(env={"SFAPPROX_CACHE": str(tmp_path / "cache"), "COLUMNS": "400"}).invoke(
        app, ["datasets", command, str(m), "--data-dir", str(missing)])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: --data-dir {missing}: no such folder; point it at the folder that holds the manifest's files, "
        "or leave it out to download them into the cache"]  # one line, before any work (no download tried)
    assert not (tmp_path / "cache").exists() and not missing.exists()


def test_datasets_commands_name_the_data_dir_option_where_to_put_a_missing_file(tmp_path):
    """verify's detail and fetch's line of a missing file say --data-dir, the option typed (the API's message
    names the keyword, data_dir=)."""
    from typer.testing import CliRunner

    from sfapprox.cli import app

    m = manifest(tmp_path, 'file = "pajek/strike.paj"\nhomepage = "http://example.org/strike"\n')
    runner = CliRunner(env={"SFAPPROX_CACHE": str(tmp_path / "cache"), "COLUMNS": "400"})
    for command in ("verify", "fetch"):
        result = runner.invoke(app, ["datasets", command, str(m), "--json", "-"] if command == "verify"
                               else ["datasets", command, str(m)])
        text = " ".join(result.output.split())
        assert "put it at DATA_DIR/pajek/strike.paj and pass --data-dir DATA_DIR;" in text, text
        assert "data_dir=" not in text, text


def test_is_present_looks_without_reading(tmp_path):
    from sfapprox.datasets.fetch import is_present

    data = tmp_path / "data"
    (data / "pajek").mkdir(parents=True)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nsha256 = "{SHA}"\n')
    assert not is_present(e, data_dir=data, cache=tmp_path / "cache")
    (data / "pajek" / "strike.paj").write_bytes(b"not the file")  # a wrong file is present; using it checks the hash
    assert is_present(e, data_dir=data, cache=tmp_path / "cache")
    assert not is_present(e, cache=tmp_path / "cache")


def test_a_manifest_s_files_are_found_beside_it_from_any_folder_and_beside_the_file_a_link_to_it_leads_to(
        tmp_path, monkeypatch):
    """A relative manifest path named a folder of the current one: a process in another folder (a Dask
    worker started elsewhere) found none of its files; a manifest that is a link (put in a run's folder)
    looked beside the link only, not beside the manifest it leads to, where its data are."""
    from sfapprox.datasets.fetch import locate

    real = tmp_path / "project"
    real.mkdir()
    (real / "points.csv").write_text("1,2\n3,4\n", encoding="utf-8")
    (real / "m.toml").write_text('[[matrix]]\nname = "pts"\ncategory = "kernel"\nfile = "points.csv"\n'
                                 'load = {kernel = "rbf"}\n', encoding="utf-8")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "m.toml").symlink_to(real / "m.toml")
    monkeypatch.chdir(real)
    here = load_manifest("m.toml").entries[0]
    linked = load_manifest(runs / "m.toml").entries[0]
    monkeypatch.chdir(tmp_path)  # elsewhere now, as a worker may be
    for e in (here, linked):
        found = locate(e, cache=tmp_path / "cache")
        assert found is not None and found.path.resolve() == real / "points.csv" and found.origin == "manifest-dir"
    assert linked.manifest == str(runs / "m.toml")  # messages name the manifest as it was given


# ------------------------------------------------------------------ archives


def make_tar(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            t.addfile(info)
    return path


def test_archive_member_and_companion_are_extracted(tmp_path, server):
    base, www, _ = server
    make_tar(www / "WebKB.tgz", {"WebKB/cornell.cites": b"a b\n", "WebKB/cornell.content": b"a 1 x\nb 0 y\n"})
    e = entry(tmp_path, f'file = "linqs/cornell.cites"\ncompanions = ["linqs/cornell.content"]\n'
                        f'url = "{base}/WebKB.tgz"\nmember = "WebKB/cornell.cites"\n')
    got = fetch_entry(e, cache=tmp_path / "cache")
    assert got.path.read_bytes() == b"a b\n"
    assert (got.path.parent / "cornell.content").read_bytes() == b"a 1 x\nb 0 y\n"


def test_zip_member_is_extracted(tmp_path, server):
    base, www, _ = server
    with zipfile.ZipFile(www / "scotland.zip", "w") as z:
        z.writestr("Scotland.paj", STRIKE)
    e = entry(tmp_path, f'file = "pajek/Scotland.paj"\nurl = "{base}/scotland.zip"\nmember = "Scotland.paj"\nsha256 = "{SHA}"\n')
    got = fetch_entry(e, cache=tmp_path / "cache")
    assert got.verified and got.path.name == "Scotland.paj"


def test_missing_member_is_reported(tmp_path, server):
    base, www, _ = server
    make_tar(www / "a.tar.gz", {"a/x.mtx": b"x"})
    e = entry(tmp_path, f'file = "x.mtx"\nurl = "{base}/a.tar.gz"\nmember = "a/y.mtx"\n')
    with pytest.raises(UnavailableError, match=r"no file member 'a/y\.mtx' \(files: a/x\.mtx\); put it at"):
        fetch_entry(e, cache=tmp_path / "cache")


@pytest.mark.parametrize(
    "members, links, why",
    [
        ({"ok.txt": b"1", "../evil.txt": b"2"}, None, "member '../evil.txt' contains '..'"),
        ({"a/../../evil.txt": b"2"}, None, "contains '..'"),
        ({"/etc/evil.txt": b"2"}, None, "member '/etc/evil.txt' is an absolute path"),
        ({"ok.txt": b"1"}, {"link": "../../outside"}, "member 'link' is a link"),
    ],
)
def test_tar_path_traversal_is_refused(tmp_path, members, links, why):
    archive = make_tar(tmp_path / "bad.tar.gz", members, links)
    with pytest.raises(InputError, match=re.escape(why) + r"; refusing the archive"):
        check_archive_members(archive)
    with pytest.raises(InputError, match="refusing the archive"):
        extract_member(archive, "ok.txt", tmp_path / "out" / "ok.txt")
    assert not (tmp_path / "out" / "ok.txt").exists()
    assert not (tmp_path.parent / "evil.txt").exists()


def test_zip_path_traversal_and_symlinks_are_refused(tmp_path):
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("ok.txt", b"1")
        z.writestr("../../evil.txt", b"2")
    with pytest.raises(InputError, match=r"member '\.\./\.\./evil\.txt' contains '\.\.'"):
        check_archive_members(bad)
    link = tmp_path / "link.zip"
    with zipfile.ZipFile(link, "w") as z:
        info = zipfile.ZipInfo("escape")
        info.external_attr = (0o120777 << 16)  # a symlink entry
        z.writestr(info, "../../outside")
    with pytest.raises(InputError, match="member 'escape' is a link"):
        check_archive_members(link)


def test_unsafe_archive_from_server_leaves_nothing(tmp_path, server):
    base, www, _ = server
    make_tar(www / "bad.tgz", {"x/strike.paj": STRIKE, "../../escape.txt": b"!"})
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/bad.tgz"\nmember = "x/strike.paj"\n')
    with pytest.raises(UnavailableError, match=r"member '\.\./\.\./escape\.txt' contains '\.\.'; refusing the archive"):
        fetch_entry(e, cache=tmp_path / "cache")
    assert not (tmp_path / "cache" / "m" / "pajek" / "strike.paj").exists()
    assert not list(tmp_path.rglob("escape.txt"))



# ------------------------------------------------------------------ bounded, verified before placed, offline


def test_cache_folder_of_a_manifest_stays_inside_the_cache(tmp_path, server):
    from sfapprox.datasets.fetch import cache_folder_name

    assert cache_folder_name("...toml") == "manifest" and cache_folder_name("/x/..toml") == "manifest"
    assert cache_folder_name("a b/c d.toml") == "c_d" and cache_folder_name("paper-table1.toml") == "paper-table1"
    base, www, _ = server
    (www / "strike.paj").write_bytes(STRIKE)
    sneaky = tmp_path / "...toml"
    sneaky.write_text(f'[[matrix]]\nname = "strike"\ncategory = "network"\nfile = "strike.paj"\n'
                      f'url = "{base}/strike.paj"\nsha256 = "{SHA}"\n', encoding="utf-8")
    cache = tmp_path / "deep" / "cache"
    got = fetch_entry(load_manifest(sneaky).entries[0], cache=cache)
    assert got.path == cache / "manifest" / "strike.paj" and got.path.resolve().is_relative_to(cache.resolve())
    assert not (tmp_path / "deep" / "strike.paj").exists()


def test_a_wrong_member_never_appears_under_the_entry_name(tmp_path, server, monkeypatch):
    """The hash is checked on the stream, before the file is moved into place."""
    import os

    base, www, _ = server
    make_tar(www / "a.tgz", {"x/strike.paj": STRIKE + b"tampered\n"})
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/a.tgz"\nmember = "x/strike.paj"\nsha256 = "{SHA}"\n')
    placed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (placed.append(str(dst)), real_replace(src, dst))[1])
    with pytest.raises(ChecksumError, match=r"a\.tgz: member 'x/strike\.paj': SHA-256 mismatch .* nothing was kept"):
        fetch_entry(e, cache=tmp_path / "cache")
    assert not [p for p in placed if p.endswith("strike.paj")]
    folder = tmp_path / "cache" / "m" / "pajek"
    assert not folder.exists() or not list(folder.iterdir())  # no file, no temporary


def test_a_member_larger_than_allowed_is_refused_before_extraction(tmp_path, server):
    base, www, _ = server
    make_tar(www / "big.tgz", {"x/big.mtx": b"0" * 200_000})
    e = entry(tmp_path, f'file = "big.mtx"\nurl = "{base}/big.tgz"\nmember = "x/big.mtx"\n')
    with pytest.raises(UnavailableError, match=r"member 'x/big\.mtx' is 195\.3 KiB, more than the 97\.7 KiB allowed"):
        fetch_entry(e, cache=tmp_path / "cache", max_bytes=100_000)
    assert not (tmp_path / "cache" / "m" / "big.mtx").exists()


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_a_name_given_twice_is_sized_by_the_member_extracted(tmp_path, kind):
    """Of a name given twice, tar and zip extract the last; its size was checked on the first (a second
    listing, which took the first), so a small file behind a large one of that name was refused."""
    archive = tmp_path / f"twice.{kind}"
    if kind == "tar":
        with tarfile.open(archive, "w") as t:
            for data in (b"0" * 200_000, b"last"):
                info = tarfile.TarInfo("m.txt")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    else:
        with zipfile.ZipFile(archive, "w") as z, pytest.warns(UserWarning, match="Duplicate name"):
            z.writestr("m.txt", b"0" * 200_000)
            z.writestr("m.txt", b"last")
    out = extract_member(archive, "m.txt", tmp_path / "out" / "m.txt", max_bytes=100_000)
    assert out.read_bytes() == b"last"


def test_decompression_is_bounded_by_the_bytes_it_produces(tmp_path, server):
    """A small compressed file that expands a lot (no size to check beforehand): stopped while streaming."""
    base, www, _ = server
    (www / "bomb.mtx.bz2").write_bytes(bz2.compress(b"0" * 5_000_000))  # about 50 bytes
    e = entry(tmp_path, f'file = "bomb.mtx"\nurl = "{base}/bomb.mtx.bz2"\n')
    with pytest.raises(UnavailableError, match=r"decompressed .*bomb\.mtx\.bz2: larger than the 97\.7 KiB allowed"):
        fetch_entry(e, cache=tmp_path / "cache", max_bytes=100_000)
    folder = tmp_path / "cache" / "m"
    assert not [p.name for p in folder.iterdir() if p.is_file()]


def test_downloads_are_bounded(tmp_path, server):
    base, www, _ = server
    (www / "big.paj").write_bytes(b"%" * 300_000)
    e = entry(tmp_path, f'file = "big.paj"\nurl = "{base}/big.paj"\n')
    with pytest.raises(UnavailableError, match=r"download from .*big\.paj: larger than the 97\.7 KiB allowed"):
        fetch_entry(e, cache=tmp_path / "cache", max_bytes=100_000)
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_size_limit_leaves_a_reserve_of_free_space(tmp_path):
    import shutil

    from sfapprox.datasets.fetch import DISK_RESERVE, size_limit

    usage = shutil.disk_usage(tmp_path)
    assert size_limit(tmp_path) <= usage.free - min(DISK_RESERVE, usage.total // 20) + 1_000_000
    assert size_limit(tmp_path, max_bytes=10) == 10


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def test_offline_download_is_one_plain_line(tmp_path):
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "http://127.0.0.1:{_closed_port()}/strike.paj"\n')
    with pytest.raises(UnavailableError) as info:
        fetch_entry(e, cache=tmp_path / "cache")
    msg = str(info.value)
    assert "entry 'strike': file 'pajek/strike.paj' not found; no network: could not reach 127.0.0.1 (connection refused); put it at" in msg
    assert "HTTPConnectionPool" not in msg and "Max retries" not in msg and "\n" not in msg


def test_after_a_no_network_failure_no_other_host_is_tried(tmp_path, monkeypatch):
    from sfapprox.datasets import fetch
    from sfapprox.datasets.fetch import NetworkState

    port = _closed_port()
    m = tmp_path / "m.toml"
    m.write_text("".join(f'[[matrix]]\nname = "{name}"\ncategory = "network"\nfile = "{name}.paj"\n'
                         f'url = "http://{host}:{port}/{name}.paj"\n\n'
                         for name, host in (("a", "127.0.0.1"), ("b", "localhost"), ("c", "127.0.0.1"))))
    a, b, c = load_manifest(m).entries
    tried = []
    real = fetch._download
    monkeypatch.setattr(fetch, "_download", lambda e, *args: (tried.append(e.name), real(e, *args))[1])
    network = NetworkState()
    with pytest.raises(UnavailableError, match=r"no network: could not reach 127\.0\.0\.1 \(connection refused\); put it at"):
        fetch_entry(a, cache=tmp_path / "cache", network=network)
    assert network.down == "no network: could not reach 127.0.0.1 (connection refused)"
    for e in (b, c):
        with pytest.raises(UnavailableError) as info:
            fetch_entry(e, cache=tmp_path / "cache", network=network)
        assert (f"entry '{e.name}': file '{e.name}.paj' not found; download not tried (no network: could not reach "
                f"127.0.0.1 (connection refused), earlier in this run); put it at DATA_DIR/{e.name}.paj") in str(info.value)
    assert tried == ["a"] and network.skipped == ["b", "c"]
    with pytest.raises(UnavailableError, match="no network: could not reach localhost"):
        fetch_entry(b, cache=tmp_path / "cache")  # without the run's state: tried
    assert tried == ["a", "b"]


def test_a_run_names_each_skipped_download_once_and_never_the_one_it_tried(tmp_path):
    # a batch asks for a model file's entry twice (its weights' names first, then the file): "skipped the
    # downloads of N more entries" counted it twice, and counted the entry whose download had failed
    from sfapprox.datasets.fetch import NetworkState

    port = _closed_port()
    m = tmp_path / "m.toml"
    m.write_text("".join(f'[[matrix]]\nname = "{name}"\ncategory = "network"\nfile = "{name}.paj"\n'
                         f'url = "http://127.0.0.1:{port}/{name}.paj"\n\n' for name in ("a", "b")))
    a, b = load_manifest(m).entries
    network = NetworkState()
    for entry in (a, a, b, b, a):
        with pytest.raises(UnavailableError):
            fetch_entry(entry, cache=tmp_path / "cache", network=network)
    assert network.down is not None and network.tried == {"a"} and network.skipped == ["b"]


def test_a_failed_download_that_is_not_the_network_tries_the_next_host(tmp_path, server):
    from sfapprox.datasets.fetch import NetworkState

    base, www, requests = server
    (www / "b.paj").write_bytes(STRIKE)
    m = tmp_path / "m.toml"
    m.write_text(f'[[matrix]]\nname = "a"\ncategory = "network"\nfile = "a.paj"\nurl = "{base}/missing.paj"\n\n'
                 f'[[matrix]]\nname = "b"\ncategory = "network"\nfile = "b.paj"\nurl = "{base}/b.paj"\n')
    a, b = load_manifest(m).entries
    network = NetworkState()
    with pytest.raises(UnavailableError, match="HTTP 404"):
        fetch_entry(a, cache=tmp_path / "cache", network=network)
    assert fetch_entry(b, cache=tmp_path / "cache", network=network).origin == "download"
    assert network.down is None and network.skipped == [] and requests == ["/missing.paj", "/b.paj"]


def test_download_problems_in_a_few_words():
    import requests

    from sfapprox.datasets.fetch import download_problem

    url = "https://sparse.tamu.edu/x.tar.gz"
    dns = requests.ConnectionError("HTTPSConnectionPool(host='sparse.tamu.edu', port=443): Max retries exceeded with url: "
                                   "/x.tar.gz (Caused by NameResolutionError(\"<urllib3.connection.HTTPSConnection object "
                                   "at 0x7f>: Failed to resolve 'sparse.tamu.edu' ([Errno -3] Temporary failure in name resolution)\"))")
    assert download_problem(dns, url) == "no network: could not reach sparse.tamu.edu (its name could not be resolved)"
    assert download_problem(requests.Timeout("read timed out"), url) == "no network: sparse.tamu.edu did not answer in time"
    assert download_problem(requests.ConnectionError("something else"), url) == "no network: could not reach sparse.tamu.edu"
    assert download_problem(RuntimeError("odd"), url) == f"download from {url} failed (RuntimeError: odd)"


def test_fetch_command_offline_one_line_per_entry_and_counts(tmp_path):
    from typer.testing import CliRunner

    from sfapprox.cli import app

    port = _closed_port()
    m = tmp_path / "m.toml"
    m.write_text(f'[[matrix]]\nname = "a"\ncategory = "network"\nfile = "a.paj"\nurl = "http://127.0.0.1:{port}/a.paj"\n\n'
                 f'[[matrix]]\nname = "b"\ncategory = "network"\nfile = "b.paj"\nurl = "http://127.0.0.1:{port}/b.paj"\n\n'
                 f'[[matrix]]\nname = "here"\ncategory = "network"\nfile = "here.paj"\n\n'
                 '[[matrix]]\nname = "g"\ncategory = "synthetic"\ngenerator = "banded"\nparams = {n = 8}\n')
    (tmp_path / "here.paj").write_bytes(STRIKE)
    result = CliRunner(env={"SFAPPROX_CACHE": str(tmp_path / "cache"), "COLUMNS": "400"}).invoke(
        app, ["datasets", "fetch", str(m)])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    failures = [line for line in lines if line.startswith("✗")]
    assert len(failures) == 2 and all("no network: could not reach 127.0.0.1 (connection refused)" in f for f in failures)
    assert "entry 'a'" in failures[0] and "entry 'b'" in failures[1]
    assert "download not tried (no network: could not reach 127.0.0.1 (connection refused), earlier in this run)" in failures[1]
    assert lines[-2].startswith("1 present, 2 missing (1 generated, nothing to fetch); download cache: ")
    assert lines[-1] == "no network: could not reach 127.0.0.1 (connection refused); skipped the downloads of 1 more entry"
    assert "Traceback" not in result.output and "urllib3" not in result.output


def test_a_download_that_stalls_is_that_download_s_problem_not_the_network_s():
    """A server that sent its headers and then nothing was reported as "no network: could not reach
    127.0.0.1", and every later entry's download was skipped, on other hosts too."""
    import requests

    from sfapprox.datasets.fetch import download_problem

    url = "http://127.0.0.1:9/x.mtx"
    stalled = requests.ConnectionError("HTTPConnectionPool(host='127.0.0.1', port=9): Read timed out.")
    for exc in (stalled, requests.ReadTimeout("HTTPConnectionPool(host='127.0.0.1', port=9): Read timed out.")):
        problem = download_problem(exc, url)
        assert problem.startswith(f"download from {url} stalled") and not problem.startswith("no network")
    assert download_problem(requests.ConnectTimeout("timed out"), url).startswith("no network")


def test_a_bad_download_is_never_reused_and_no_copy_is_kept(tmp_path, monkeypatch):
    """pooch reuses a file already in .downloads: a wrong or truncated copy was "downloaded" again on every
    retry without a request (the README says a bad download is deleted), and each good one kept twice."""
    import gzip
    import hashlib

    import pooch

    from sfapprox.datasets import fetch

    good = b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.0\n"
    served = {"body": gzip.compress(b"wrong")}
    requests_made = []

    def fake_retrieve(url, known_hash, fname, path, downloader, progressbar):
        requests_made.append(url)
        out = Path(path) / fname
        if not out.exists():  # pooch's own rule: a file there is reused
            out.write_bytes(served["body"])
        return str(out)

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    m = tmp_path / "m.toml"
    m.write_text('[[matrix]]\nname = "g"\ncategory = "network"\nfile = "g.mtx"\nurl = "http://h/g.mtx.gz"\n'
                 f'sha256 = "{hashlib.sha256(good).hexdigest()}"\n')
    from sfapprox.datasets.manifest import load_manifest

    entry = load_manifest(m).entries[0]
    with pytest.raises(Exception, match="(?i)sha-?256|mismatch"):
        fetch._download(entry, tmp_path / "cache", None)
    served["body"] = gzip.compress(good)  # the server fixed
    path, verified = fetch._download(entry, tmp_path / "cache", None)
    assert verified and path.read_bytes() == good and len(requests_made) == 2
    assert list((tmp_path / "cache" / ".downloads").iterdir()) == []  # no copy kept beside the file


def test_what_killed_downloads_left_is_swept_and_a_live_one_s_file_kept(tmp_path, server):
    """``kill -9`` during a download left its copy (and pooch's temporary file) in .downloads for
    good, counted against every later download's size limit."""
    import subprocess
    import time

    from sfapprox.datasets import fetch

    base, www, _ = server
    (www / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj"\nsha256 = "{SHA}"\n')
    downloads = tmp_path / "cache" / "m" / ".downloads"
    downloads.mkdir(parents=True)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a process id that no longer runs
    (downloads / f"run{gone.pid}-strike-strike.paj").write_bytes(b"half")
    (downloads / "tmpab12cd34").write_bytes(b"half")
    old = time.time() - 2 * fetch.STALE_SECONDS
    os.utime(downloads / "tmpab12cd34", (old, old))
    live = [downloads / f"run{os.getppid()}-strike-strike.paj", downloads / "tmpfresh99"]  # another run's, now
    for path in live:
        path.write_bytes(b"in progress")
    got = fetch_entry(e, cache=tmp_path / "cache")
    assert got.origin == "download" and got.path.read_bytes() == STRIKE
    assert sorted(downloads.iterdir()) == sorted(live)


def test_a_corrupted_download_in_the_cache_says_how_to_replace_it(tmp_path):
    """A corrupted file in the download cache failed every run with "SHA-256 mismatch ... corrupted" and
    no word of what to do, though its URL is known."""
    import hashlib

    from sfapprox.datasets.fetch import _entry_cache, locate
    from sfapprox.datasets.manifest import load_manifest

    m = tmp_path / "m.toml"
    m.write_text('[[matrix]]\nname = "g"\ncategory = "network"\nfile = "g.mtx"\nurl = "http://h/g.mtx"\n'
                 f'sha256 = "{hashlib.sha256(b"good").hexdigest()}"\n')
    entry = load_manifest(m).entries[0]
    cache = tmp_path / "cache"
    folder = _entry_cache(entry, cache)
    folder.mkdir(parents=True)
    (folder / "g.mtx").write_bytes(b"bad")
    with pytest.raises(ChecksumError, match="it is a download in sfapprox's cache: delete it"):
        locate(entry, cache=cache)
    (folder / "g.mtx").unlink()
    (tmp_path / "g.mtx").write_bytes(b"bad")  # beside the manifest: the user's own file, no such advice
    with pytest.raises(ChecksumError) as info:
        locate(entry, cache=cache)
    assert "delete it" not in str(info.value)


def test_ctrl_c_while_a_download_is_decompressed_stops_at_once_and_places_nothing(tmp_path):
    """The whole decompression (or extraction) ran with Ctrl-C and SIGTERM held back: a 500 MB .bz2 took
    7 s to stop, and then placed the file anyway (minutes for a larger one)."""
    import signal

    from sfapprox.datasets.fetch import _Sink

    class Source:  # what bz2.open gives, with a Ctrl-C arriving while it is read
        reads = 0

        def read(self, size):
            Source.reads += 1
            if Source.reads == 2:
                os.kill(os.getpid(), signal.SIGINT)
            return b"x" * size if Source.reads <= 50 else b""

    final = tmp_path / "cache" / "big.libsvm"
    with pytest.raises(KeyboardInterrupt):
        _Sink((), final, None, "m.toml: entry 'big'").fill(Source(), "download")
    assert Source.reads < 5  # stopped where it was
    assert not final.parent.exists() or list(final.parent.iterdir()) == []  # no file, no temporary


@pytest.mark.parametrize("body, cause", [
    (b"BZh9" + b"\0" * 60, "Invalid data stream"),  # corrupt
    (bz2.compress(STRIKE)[:-10], "Compressed file ended before the end-of-stream marker"),  # cut short
], ids=["corrupt", "cut-short"])
def test_a_damaged_compressed_download_is_one_line_naming_the_url(tmp_path, server, body, cause):
    """A corrupt .bz2 read "failed (OutputError: <cache file>: not written: Invalid data stream ...)", a cut-short
    one "failed (EOFError: ...)": type names, and the cache's file named as if writing it had failed."""
    base, www, _ = server
    (www / "strike.paj.bz2").write_bytes(body)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj.bz2"\n')
    with pytest.raises(UnavailableError) as info:
        fetch_entry(e, cache=tmp_path / "cache")
    msg = str(info.value)
    assert f"download from {base}/strike.paj.bz2: not a complete, valid .bz2 file ({cause}" in msg
    assert "Error" not in msg and msg.count("entry 'strike'") == 1 and "put it at DATA_DIR/pajek/strike.paj" in msg
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


@pytest.mark.parametrize("url_file", ["strike.paj", "strike.paj.bz2"])
def test_a_web_page_sent_with_status_200_is_not_kept_as_the_file(tmp_path, url_file):
    """An error or sign-in page sent with status 200 was kept as the entry's file (no sha256 to catch it):
    every later run read the HTML as the matrix, failed, and never downloaded again."""
    page = b"<!DOCTYPE html>\n<html><body>Service unavailable</body></html>\n"

    class Page(_Handler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    httpd = _serve(Page)
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/{url_file}"
        e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{url}"\n')
        with pytest.raises(UnavailableError, match=re.escape(f"download from {url}: the server sent a web page (HTML)")):
            fetch_entry(e, cache=tmp_path / "cache")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_a_checksum_mismatch_after_decompression_names_the_url(tmp_path, server):
    """It named this run's own copy ("decompressed run1234-strike-strike.paj.bz2"), a file nobody can find."""
    base, www, _ = server
    (www / "strike.paj.bz2").write_bytes(bz2.compress(STRIKE))
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj.bz2"\nsha256 = "{"1" * 64}"\n')
    with pytest.raises(ChecksumError) as info:
        fetch_entry(e, cache=tmp_path / "cache")
    assert f"entry 'strike': decompressed download from {base}/strike.paj.bz2: SHA-256 mismatch" in str(info.value)
    assert "run" not in str(info.value)


def _serve(handler):
    """Start ``handler`` on a free port of 127.0.0.1; return the server (shut it down when done)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd


class _CutShort(_Handler):
    """Promises the whole of STRIKE (Content-Length) and closes the connection half way."""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(STRIKE)))
        self.end_headers()
        self.wfile.write(STRIKE[: len(STRIKE) // 2])
        self.close_connection = True


class _Loop(_Handler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", self.path)
        self.end_headers()


class _ToFtp(_Handler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", "ftp://example.org/strike.paj")
        self.end_headers()


@pytest.mark.parametrize("handler, problem", [
    (_CutShort, "was cut short (the connection closed before the whole file came); try again"),
    (_Loop, "failed (too many redirects; the URL may have moved: check it in a browser)"),
    (_ToFtp, "failed (InvalidSchema: No connection adapters were found for 'ftp://example.org/strike.paj')"),
], ids=["cut-short", "redirect-loop", "redirect-to-ftp"])
def test_what_went_wrong_with_a_download_is_said_in_words(tmp_path, handler, problem):
    """These read "failed (ChunkedEncodingError)", "failed (TooManyRedirects)", "failed (InvalidSchema)":
    a type name, and nothing of what happened or what to do."""
    httpd = _serve(handler)
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/strike.paj"
        e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{url}"\n')
        with pytest.raises(UnavailableError) as info:
            fetch_entry(e, cache=tmp_path / "cache")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert f"download from {url} {problem}; put it at DATA_DIR/pajek/strike.paj" in str(info.value)
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_a_gz_file_labelled_content_encoding_gzip_and_cut_short_is_said_so(tmp_path):
    """Its body is read as sent (not through requests' decoding): urllib3's error is still said in words."""
    body = gzip.compress(os.urandom(4000))

    class CutShortGz(_Handler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.close_connection = True

    httpd = _serve(CutShortGz)
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/strike.paj.gz"
        with pytest.raises(UnavailableError, match=re.escape(f"download from {url} was cut short")):
            fetch_entry(entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{url}"\n'), cache=tmp_path / "cache")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


@pytest.mark.parametrize("spoil", ["file-in-the-way", "temporary-refused"])
def test_a_cache_that_cannot_be_written_is_named_with_what_to_do(tmp_path, server, monkeypatch, spoil):
    """A cache that cannot be written read "download from URL failed (<cache folder>: Read-only file system)":
    the download blamed, though none was made, and no word of SFAPPROX_CACHE."""
    import errno
    import tempfile

    base, www, requests = server
    (www / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj"\n')
    cache = tmp_path / "cache"
    if spoil == "file-in-the-way":
        cache.write_bytes(b"")
    else:  # .downloads read-only (which binds no root): pooch's temporary file there is refused
        def refused(*args, dir=None, **kwargs):
            raise PermissionError(errno.EACCES, "Permission denied", os.path.join(dir, "tmpab12cd34"))

        monkeypatch.setattr(tempfile, "NamedTemporaryFile", refused)
    with pytest.raises(UnavailableError) as info:
        fetch_entry(e, cache=cache)
    msg = str(info.value)
    assert "file 'pajek/strike.paj' not found; the download cache cannot be written (" in msg
    assert "set SFAPPROX_CACHE to a folder you can write; put it at DATA_DIR/pajek/strike.paj" in msg
    assert "download from" not in msg and requests == []


class _FullDisk:
    """A file opened for writing on a disk with no room left: each write fails as the system's would."""

    def __init__(self, file, code: int):
        self.file, self.code = file, code

    def write(self, data):
        raise OSError(self.code, os.strerror(self.code))

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


@pytest.mark.parametrize("where, code", [("download", "ENOSPC"), ("cache file", "ENOSPC"), ("download", "EDQUOT")])
def test_a_full_disk_under_the_cache_says_so_and_what_to_do(tmp_path, server, monkeypatch, where, code):
    """A full disk showed its cause, then "set SFAPPROX_CACHE to a folder you can write": the cache could be
    written, and the hint that a write there gives ("is full; free some space") was left out."""
    import builtins
    import errno

    import pooch

    from sfapprox.datasets import fetch

    code = getattr(errno, code)
    base, www, _ = server
    (www / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj"\n')
    cache = tmp_path / "cache"
    if where == "download":  # pooch writing its copy in .downloads
        def full(url, known_hash, fname, path, **kwargs):
            raise OSError(code, os.strerror(code), os.path.join(path, "tmpab12cd34"))

        monkeypatch.setattr(pooch, "retrieve", full)
    else:  # the entry's file written into the cache from the downloaded copy
        def full_open(file, mode="r", *args, **kwargs):
            opened = builtins.open(file, mode, *args, **kwargs)
            return _FullDisk(opened, code) if "w" in mode else opened

        monkeypatch.setattr(fetch, "open", full_open, raising=False)
    with pytest.raises(UnavailableError) as info:
        fetch_entry(e, cache=cache)
    msg = str(info.value)
    assert "the download cache cannot be written (" in msg and os.strerror(code) in msg
    assert f"the file system holding {cache / 'm'} is full; free some space, or set SFAPPROX_CACHE to a folder on " \
           "another disk; put it at DATA_DIR/pajek/strike.paj" in msg, msg
    assert "a folder you can write" not in msg
    assert not [p for p in cache.rglob("*") if p.is_file()]


@pytest.mark.parametrize("code, advice", [
    ("EROFS", "the file system holding {folder} is read-only; choose a folder on another one"),
    ("EFBIG", "larger than the file system holding {folder} takes (FAT32, usual on USB drives, takes at most 4 GiB); "
              "choose a folder on another file system"),
])
def test_a_cache_on_a_read_only_or_too_small_file_system_says_so_not_a_folder_you_can_write(
        tmp_path, server, monkeypatch, code, advice):
    """"set SFAPPROX_CACHE to a folder you can write" was said of a read-only disk and of a file over its file
    system's largest (FAT32's 4 GiB): a folder there could be written, and would fail alike."""
    import builtins
    import errno
    import resource

    from sfapprox.datasets import fetch

    number = getattr(errno, code)
    base, www, _ = server
    (www / "strike.paj").write_bytes(STRIKE)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/strike.paj"\n')
    cache = tmp_path / "cache"

    def failing_open(file, mode="r", *args, **kwargs):
        opened = builtins.open(file, mode, *args, **kwargs)
        return _FullDisk(opened, number) if "w" in mode else opened

    monkeypatch.setattr(fetch, "open", failing_open, raising=False)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    with pytest.raises(UnavailableError) as info:
        fetch_entry(e, cache=cache)
    msg = str(info.value)
    assert f": {os.strerror(number)}" in msg and \
        f"): {advice.format(folder=cache / 'm')} (SFAPPROX_CACHE sets the cache's folder)" in msg, msg
    assert "a folder you can write" not in msg
    assert not [p for p in cache.rglob("*") if p.is_file()]


@pytest.mark.parametrize("body, problem", [
    (b"junk" * 100, "not a readable zip or tar archive (neither zip nor tar, plain or compressed)"),
    ("cut", "not a readable zip or tar archive (Compressed file ended before the end-of-stream marker was reached)"),
    ("traversal", "member '../evil' contains '..'; refusing the archive"),
], ids=["not-an-archive", "cut-short", "traversal"])
def test_an_archive_download_s_problems_name_its_url_not_this_run_s_copy(tmp_path, server, body, problem):
    """They named ".../cache/m/.downloads/run1234-strike-x.tgz", deleted by the time the message is read
    (and a file that is no archive listed every method tarfile tried)."""
    base, www, _ = server
    if body == "cut":
        body = make_tar(tmp_path / "x.tgz", {"x/strike.paj": os.urandom(4000)}).read_bytes()[:300]
    elif body == "traversal":
        body = make_tar(tmp_path / "x.tgz", {"x/strike.paj": STRIKE, "../evil": b""}).read_bytes()
    (www / "x.tgz").write_bytes(body)
    e = entry(tmp_path, f'file = "pajek/strike.paj"\nurl = "{base}/x.tgz"\nmember = "x/strike.paj"\n')
    with pytest.raises(UnavailableError) as info:
        fetch_entry(e, cache=tmp_path / "cache")
    msg = str(info.value)
    assert f"not found; download from {base}/x.tgz: {problem}" in msg
    assert ".downloads" not in msg and "run" not in msg.split("not found")[1]
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_a_size_limit_is_said_as_other_messages_say_sizes(tmp_path, server):
    """fetch had its own size helper, "the 1 bytes allowed"; sizes are format_bytes's ("1 B") as elsewhere."""
    base, www, _ = server
    (www / "two.paj").write_bytes(b"%%")
    e = entry(tmp_path, f'file = "two.paj"\nurl = "{base}/two.paj"\n')
    with pytest.raises(UnavailableError, match=r"download from .*two\.paj: larger than the 1 B allowed"):
        fetch_entry(e, cache=tmp_path / "cache", max_bytes=1)
    archive = make_tar(tmp_path / "two.tar", {"m.txt": b"00"})
    with pytest.raises(InputError, match=r"member 'm\.txt' is 2 B, more than the 1 B allowed"):
        extract_member(archive, "m.txt", tmp_path / "out" / "m.txt", max_bytes=1)
