"""jitops.cache against a temporary directory: prewarm, stats, entries, verify, export,
import and clear, as `jitops-cache` does them."""

from __future__ import annotations

import os
import sqlite3
import typing

import pytest

import jitops


def test_reading_a_location_without_a_cache_returns_nothing(tmp_path):
    assert jitops.cache.stats(str(tmp_path / "none")) == []
    assert jitops.cache.entries(dir=str(tmp_path / "none")) == []


def test_prewarm_then_inspect_verify_export_import_clear(cache_dir, tmp_path):
    progress = []
    [result] = jitops.cache.prewarm(["sm_90"], op="example", jobs=2, dir=cache_dir,
                                    progress=lambda arch, done, total: progress.append((arch, done, total)))
    assert result.entries > 0 and result.failures == []
    assert result.compiled == result.entries
    # Each entry reported once, in order, though two workers compile at once.
    assert progress == [("sm_90", done, result.entries) for done in range(1, result.entries + 1)]

    [group] = jitops.cache.stats(cache_dir)
    assert (group.op, group.target, group.entries) == ("example", "sm_90", result.entries)
    rows = jitops.cache.list(op="example", dir=cache_dir)
    assert len(rows) == result.entries and all(len(r.key) == 16 and r.bytes > 0 for r in rows)
    assert jitops.cache.entries(target="sm_80", dir=cache_dir) == []
    assert jitops.cache.verify(cache_dir) == (result.entries, 0)

    shipped = tmp_path / "shipped.db"
    jitops.cache.export(str(shipped), dir=cache_dir)
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    assert jitops.cache.import_(str(shipped), dir=str(other)) == (result.entries, 0)
    assert jitops.cache.import_(str(shipped), dir=str(other)) == (0, 0)  # nothing new

    assert jitops.cache.clear(dir=cache_dir) == result.entries
    assert [g.entries for g in jitops.cache.stats(cache_dir)] == [0]  # the usage counters stay


def test_prewarm_a_second_time_compiles_nothing(cache_dir):
    first, = jitops.cache.prewarm(["sm_80"], op="example", dir=cache_dir)
    second, = jitops.cache.prewarm(["sm_80"], op="example", dir=cache_dir)
    assert (second.compiled, second.cached) == (0, first.entries)


def test_verify_drops_a_tampered_blob(cache_dir):
    jitops.cache.prewarm(["sm_90"], op="example", dir=cache_dir)
    with sqlite3.connect(jitops.cache.path(cache_dir)) as db:
        tables = [name for (name,) in db.execute("select name from sqlite_master where type='table'")]
        table = next(t for t in tables if "blob" in {c[1] for c in db.execute(f"pragma table_info({t})")})
        db.execute(f"update {table} set blob = zeroblob(length(blob)) where rowid = (select min(rowid) from {table})")
    checked, dropped = jitops.cache.verify(cache_dir)
    assert dropped == 1 and checked >= 1


def test_cache_errors_name_the_problem(tmp_path):
    with pytest.raises(jitops.NotFoundError, match="no-such-op"):
        jitops.cache.prewarm(["sm_90"], op="no-such-op", dir=str(tmp_path))
    with pytest.raises(jitops.InvalidArgumentError):
        jitops.cache.clear(older_than_days=-1, dir=str(tmp_path))
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    os.chmod(unsafe, 0o777)
    with pytest.raises(jitops.CacheError):
        jitops.cache.path(str(unsafe))


def test_annotations_resolve():
    # typing.get_type_hints once failed here: the module's own `list` (jitops-cache's name for
    # entries) stood for the built-in one in the annotations.
    for api in (jitops.cache.PrewarmResult, jitops.cache.stats, jitops.cache.entries, jitops.cache.catalogue,
                jitops.cache.prewarm, jitops.get_kernel, jitops.Kernel.__init__):
        typing.get_type_hints(api)


def test_catalogue_lists_every_family():
    ops = {op for op, _ in jitops.cache.catalogue()}
    assert {"ctc", "scan", "segment", "repeat", "flce", "example"} <= ops


@pytest.fixture
def redis_url(tmp_path):
    """A redis-server of the test's own on a free loopback port."""
    import shutil
    import socket
    import subprocess
    import time

    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(tmp_path)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
                break
            except OSError:
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_push_then_pull_moves_every_kernel_through_redis(cache_dir, tmp_path, redis_url):
    [result] = jitops.cache.prewarm(["sm_90"], op="example", dir=cache_dir)
    assert jitops.cache.push(remote=redis_url, key="a shared fleet key", dir=cache_dir) == result.entries
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    assert jitops.cache.pull(remote=redis_url, key="another key", dir=str(other)) == (0, result.entries)
    assert jitops.cache.pull(remote=redis_url, key="a shared fleet key", dir=str(other)) == (result.entries, 0)
    assert {e.key for e in jitops.cache.entries(dir=str(other))} == {e.key for e in jitops.cache.entries(dir=cache_dir)}
