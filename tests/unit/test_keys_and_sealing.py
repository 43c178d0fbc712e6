"""Per-subject keys and sealed records: what crypto-shredding relies on."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.erasures import ref_of_key
from streams.keys import DestructionCount, FileKeyStore, SubjectErased
from streams.ledger import ErasureLedger, reconcile
from streams.sealing import Sealer, SealError, is_sealed, readable, sealed_subject

SUBJECT = "clinic-a:patient-1"


def test_given_a_sealed_record_then_only_its_subjects_key_opens_it(tmp_path: Path) -> None:
    sealer = Sealer(FileKeyStore(tmp_path))
    sealed = sealer.seal(SUBJECT, b"\x00framed record")
    assert is_sealed(sealed)
    assert b"framed record" not in sealed
    assert sealed_subject(sealed) == SUBJECT
    assert sealer.open(sealed) == (SUBJECT, b"\x00framed record")


def test_given_a_record_moved_to_another_subject_then_it_does_not_open(tmp_path: Path) -> None:
    sealer = Sealer(FileKeyStore(tmp_path))
    sealer.seal("clinic-a:patient-2", b"other")
    sealed = sealer.seal(SUBJECT, b"\x00mine")
    moved = sealed.replace(SUBJECT.encode(), b"clinic-a:patient-2")
    with pytest.raises(SealError):
        sealer.open(moved)


def test_given_an_erased_subject_then_old_records_never_open_and_no_new_key_is_made(
    tmp_path: Path,
) -> None:
    keys = FileKeyStore(tmp_path)
    sealer = Sealer(keys)
    sealed = sealer.seal(SUBJECT, b"\x00before erasure")
    assert keys.destroy(SUBJECT) is True
    assert readable(sealer, sealed) is None
    with pytest.raises(SubjectErased):
        sealer.open(sealed)
    with pytest.raises(SubjectErased):
        sealer.seal(SUBJECT, b"\x00after erasure")
    assert not list(tmp_path.rglob("*.key"))


def test_given_another_process_erased_the_subject_then_a_cached_key_is_not_used(
    tmp_path: Path,
) -> None:
    mine, theirs = FileKeyStore(tmp_path), FileKeyStore(tmp_path)
    sealed = Sealer(mine).seal(SUBJECT, b"\x00cached")
    theirs.destroy(SUBJECT)
    assert readable(Sealer(mine), sealed) is None


def test_given_a_record_that_does_not_open_then_readers_skip_it_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Sealed under a key the store no longer holds (a key restored or replaced by hand): the
    reader of a whole tenant goes on with the other subjects' records."""
    sealer = Sealer(FileKeyStore(tmp_path / "then"))
    stale = sealer.seal(SUBJECT, b"\x00stale")
    now = Sealer(FileKeyStore(tmp_path / "now"))
    now.seal(SUBJECT, b"\x00another key")
    kept = now.seal("clinic-a:patient-2", b"\x00kept")
    with caplog.at_level("WARNING", logger="streams.sealing"):
        assert [readable(now, value) for value in (stale, kept)] == [None, b"\x00kept"]
    assert "cannot be opened" in caplog.text


def test_given_a_key_store_restored_from_before_an_erasure_then_the_ledger_shreds_it_again(
    tmp_path: Path,
) -> None:
    """A copy of the key store taken before an erasure still holds the key: a process that
    reads with it opens the erased subject's records, until it reconciles with the ledger (as
    the worker does when it starts and every reading command before it opens anything)."""
    keys_dir, backup = tmp_path / "keys", tmp_path / "backup"
    sealed = Sealer(FileKeyStore(keys_dir)).seal(SUBJECT, b"\x00before erasure")
    shutil.copytree(keys_dir, backup)
    FileKeyStore(keys_dir).destroy(SUBJECT)
    shutil.rmtree(keys_dir)
    shutil.copytree(backup, keys_dir)
    restored = FileKeyStore(keys_dir)
    assert readable(Sealer(restored), sealed) == b"\x00before erasure"

    reconcile(ErasureLedger(restored, {ref_of_key(SUBJECT)}), restored)

    assert readable(Sealer(restored), sealed) is None
    assert readable(Sealer(FileKeyStore(keys_dir)), sealed) is None


def test_given_every_erasure_already_done_then_reconciling_again_empties_no_cache(
    tmp_path: Path,
) -> None:
    """Each reading command reconciles: one that finds nothing to destroy does not move the
    count of destroyed keys, which would make every process read its keys again."""
    keys = FileKeyStore(tmp_path)
    keys.key_for_writing(SUBJECT)
    keys.destroy(SUBJECT)
    count = DestructionCount(tmp_path).current()
    ledger = ErasureLedger(keys, {ref_of_key(SUBJECT)})
    reconcile(ledger, keys)
    reconcile(ledger, FileKeyStore(tmp_path))
    assert DestructionCount(tmp_path).current() == count


DESTROY_IN_ANOTHER_PROCESS = (
    "import sys; from pathlib import Path; from streams.keys import FileKeyStore; "
    "FileKeyStore(Path(sys.argv[1])).destroy(sys.argv[2])"
)


def test_given_a_key_destroyed_by_another_process_then_its_cached_copy_is_dropped_here(
    tmp_path: Path,
) -> None:
    sealer = Sealer(FileKeyStore(tmp_path))
    erased = sealer.seal(SUBJECT, b"\x00erased")
    kept = sealer.seal("clinic-a:patient-2", b"\x00kept")
    command = [sys.executable, "-c", DESTROY_IN_ANOTHER_PROCESS, str(tmp_path), SUBJECT]
    subprocess.run(command, check=True)
    assert readable(sealer, erased) is None
    assert readable(sealer, kept) == b"\x00kept"


def test_given_a_cached_key_destroyed_by_another_process_then_it_is_reported_destroyed_here(
    tmp_path: Path,
) -> None:
    store = FileKeyStore(tmp_path)
    store.key_for_writing(SUBJECT)
    store.key_for_writing("clinic-a:patient-2")
    assert not store.is_destroyed(SUBJECT)
    command = [sys.executable, "-c", DESTROY_IN_ANOTHER_PROCESS, str(tmp_path), SUBJECT]
    subprocess.run(command, check=True)
    assert store.is_destroyed(SUBJECT)
    assert not store.is_destroyed("clinic-a:patient-2")


def test_given_two_stores_creating_the_same_key_then_they_agree(tmp_path: Path) -> None:
    first, second = FileKeyStore(tmp_path), FileKeyStore(tmp_path)
    assert first.key_for_writing(SUBJECT) == second.key_for_writing(SUBJECT)


def test_key_files_do_not_name_the_subject(tmp_path: Path) -> None:
    FileKeyStore(tmp_path).key_for_writing(SUBJECT)
    assert all("patient-1" not in str(path) for path in tmp_path.rglob("*"))


def test_given_an_unsealed_value_then_it_passes_through(tmp_path: Path) -> None:
    assert Sealer(FileKeyStore(tmp_path)).open(b"\x00\x00\x00\x00\x01avro") == (
        None,
        b"\x00\x00\x00\x00\x01avro",
    )


def test_given_a_new_key_then_only_its_owner_can_read_it_and_no_draft_is_left(
    tmp_path: Path,
) -> None:
    store = FileKeyStore(tmp_path / "keys")
    store.key_for_writing("clinic-a:patient-1")
    (key_file,) = (tmp_path / "keys").rglob("*.key")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert [path.name for path in key_file.parent.iterdir()] == [key_file.name]


def test_given_a_key_an_older_version_left_readable_by_others_then_reading_it_makes_it_private(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "keys"
    key = FileKeyStore(directory).key_for_writing(SUBJECT)
    (key_file,) = directory.rglob("*.key")
    key_file.chmod(0o644)
    key_file.parent.chmod(0o755)
    directory.chmod(0o755)

    assert FileKeyStore(directory).key_for(SUBJECT) == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
