"""Catalog discovery: a malformed kata folder is named precisely and hides nothing else."""

from __future__ import annotations

import shutil

import pytest

from grader.catalog import KATAS_DIR, load_catalog
from grader.errors import CatalogError


def test_the_shipped_catalog_has_no_problems():
    cat = load_catalog()
    assert cat.problems == []
    assert "paged-kv" in cat.katas
    for kata in cat.katas.values():
        assert kata.module == kata.slug.replace("-", "_") and kata.minutes == 75
        assert [lv.level for lv in kata.levels] == list(range(1, len(kata.levels) + 1))
        assert all(lv.hints for lv in kata.levels) and kata.followups


@pytest.fixture
def katas_copy(tmp_path):
    target = tmp_path / "katas"
    shutil.copytree(KATAS_DIR / "paged_kv", target / "paged_kv")
    return target


def _break(katas_copy, name, text):
    broken = katas_copy / name
    shutil.copytree(katas_copy / "paged_kv", broken)
    (broken / "kata.toml").write_text(text.replace('slug = "paged-kv"', f'slug = "{name.replace("_", "-")}"'))
    return broken


@pytest.mark.parametrize("mutate,message", [
    (lambda t: t.replace('slug = "paged-kv"', 'slug = "other"'), "field 'slug' is 'other'"),
    (lambda t: t.replace("minutes = 75", "minutes = -3", 1), "field 'minutes' must be a positive integer"),
    (lambda t: t.replace('difficulty = "', 'difficulty = "x', 1), "field 'difficulty' must be one of"),
    (lambda t: "\n".join(line for line in t.splitlines() if not line.startswith("title")), "field 'title' is missing"),
    (lambda t: t + "\n[[[ not toml", "not valid TOML"),
    # A follow-up's key term with no letter or digit could never match an answer.
    (lambda t: t.replace("keys = [[", 'keys = [["() ->", "+"], [', 1),
     "field 'keys' holds the term '() ->', which has no letter or digit"),
])
def test_malformed_kata_toml_names_file_and_field_and_others_still_load(katas_copy, mutate, message):
    original = (katas_copy / "paged_kv" / "kata.toml").read_text()
    _break(katas_copy, "paged_kv_broken", mutate(original))
    cat = load_catalog(katas_copy)
    assert "paged-kv" in cat.katas
    assert len(cat.problems) == 1
    assert "katas/paged_kv_broken/kata.toml" in cat.problems[0].message
    assert message in cat.problems[0].message


def test_missing_file_is_named(katas_copy):
    broken = katas_copy / "broken"
    shutil.copytree(katas_copy / "paged_kv", broken)
    (broken / "stub.py").unlink()
    cat = load_catalog(katas_copy)
    assert [p.message for p in cat.problems] == ["katas/broken/stub.py is missing"]


def test_get_unknown_kata_suggests_close_names():
    with pytest.raises(CatalogError, match="unknown kata 'paged'"):
        load_catalog().get("paged")


def test_parsed_kata_toml_is_cached_until_the_file_changes(katas_copy, tmp_path, monkeypatch):
    import json

    from grader import catalog

    monkeypatch.setenv("KATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(catalog, "_toml_cache", {})
    assert load_catalog(katas_copy).get("paged-kv").title
    cache_file = catalog._toml_cache_path(katas_copy.resolve())
    assert cache_file.parent == tmp_path / "cache"
    entries = json.loads(cache_file.read_text())
    toml = katas_copy / "paged_kv" / "kata.toml"
    assert entries[str(toml.resolve())][1]["slug"] == "paged-kv"

    # A fresh process reads the cache, not the file: what the cache holds is what loads...
    monkeypatch.setattr(catalog, "_toml_cache", {})
    entries[str(toml.resolve())][1]["title"] = "From the cache"
    cache_file.write_text(json.dumps(entries))
    assert load_catalog(katas_copy).get("paged-kv").title == "From the cache"
    # ...until the text changes, even to one of the same size at once (the same mtime on a
    # coarse clock): then it is parsed again.
    monkeypatch.setattr(catalog, "_toml_cache", {})
    text = toml.read_text()
    stamp = toml.stat().st_mtime_ns
    edited = text.replace('title = "', 'title = "EDIT', 1).replace('slug = "paged-kv"', 'slug="paged-kv"', 1)
    edited = edited.replace("minutes = 75", "minutes=75", 1)
    assert len(edited) == len(text) and edited != text
    toml.write_text(edited)
    import os

    os.utime(toml, ns=(stamp, stamp))
    assert load_catalog(katas_copy).get("paged-kv").title.startswith("EDIT")
    # A cache file that is not JSON is parsed around and rewritten.
    monkeypatch.setattr(catalog, "_toml_cache", {})
    cache_file.write_text("{not json")
    assert load_catalog(katas_copy).get("paged-kv").title.startswith("EDIT")
    assert json.loads(cache_file.read_text())


def test_catalogs_load_from_many_threads_at_once_and_the_cache_stays_small(tmp_path, monkeypatch):
    """A review loads the catalog from each unit's thread: new files parsed in one thread
    while another writes the cache out must not break either. Each katas folder has its own
    cache file, holding only files that still exist; another folder's file unused for
    _TOML_CACHE_KEEP_S is removed at the next write (with the single file of before)."""
    import json
    import os
    import threading

    from grader import catalog

    monkeypatch.setenv("KATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(catalog, "_toml_cache", {})
    copies = []
    for i in range(24):
        target = tmp_path / f"katas{i}"
        for folder in ("paged_kv", "rope"):
            shutil.copytree(KATAS_DIR / folder, target / folder)
        copies.append(target)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "catalog-v2.json").write_text("{}")
    errors: list[BaseException] = []

    def load(folders):
        try:
            for folder in folders:
                assert set(load_catalog(folder).katas) == {"paged-kv", "rope"}
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=load, args=(copies[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert not (tmp_path / "cache" / "catalog-v2.json").exists()
    for folder in copies:
        kept = json.loads(catalog._toml_cache_path(folder.resolve()).read_text())
        assert sorted(kept) == [str(folder.resolve() / name / "kata.toml") for name in ("paged_kv", "rope")]
    # A file gone is dropped at the next write of its folder's cache.
    (copies[1] / "rope" / "kata.toml").write_text((copies[1] / "rope" / "kata.toml").read_text() + "\n")
    shutil.rmtree(copies[1] / "paged_kv")
    load_catalog(copies[1])
    kept = json.loads(catalog._toml_cache_path(copies[1].resolve()).read_text())
    assert list(kept) == [str(copies[1].resolve() / "rope" / "kata.toml")]
    # A folder's cache unused for long is removed when another is written.
    old = catalog._toml_cache_path(copies[0].resolve())
    long_ago = old.stat().st_mtime - catalog._TOML_CACHE_KEEP_S - 60
    os.utime(old, (long_ago, long_ago))
    (copies[2] / "rope" / "kata.toml").write_text((copies[2] / "rope" / "kata.toml").read_text() + "\n")
    load_catalog(copies[2])
    assert not old.exists() and catalog._toml_cache_path(copies[3].resolve()).exists()
