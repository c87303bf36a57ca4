"""Unit tests of plugins/module_utils/motor_configmap.py: the rendered directory (functions injected, files written once,
stale files removed) and the tar members taken from the image archive."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_configmap as cm

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the module chowns to root, as it does on the hosts")


def startup(tmp_path):
    scripts = tmp_path / "startup"
    (scripts / "roles").mkdir(parents=True)
    (scripts / "boot.sh").write_text("#!/bin/bash\nsource common.sh\n")
    (scripts / "roles" / "engine.sh").write_text("start_engine\n")
    return scripts


def test_render_functions_quote_for_the_shell():
    text = cm.render_functions({"set_prefill_env": {"B": 'say "$x" `y`', "A": "1"}, "set_decode_env": {}})
    assert text == 'set_decode_env() {\n    :\n}\nset_prefill_env() {\n    export A="1"\n    export B="say \\"\\$x\\" \\`y\\`"\n}\n'


def test_sync_writes_once_injects_functions_and_removes_stale_files(tmp_path):
    scripts = startup(tmp_path)
    target = tmp_path / "etc" / "job" / "job-p0-0"
    container = {"name": "job-p0-0", "path": str(target), "files": {"user_config.json": "{}\n"},
                 "functions": {"engine.sh": {"set_prefill_env": {"ROLE": "prefill"}}}}
    changed, digest = cm.sync_container(container, str(scripts), 0o750, 0o640, False)
    assert changed
    assert (target / "roles" / "engine.sh").read_text() == 'set_prefill_env() {\n    export ROLE="prefill"\n}\nstart_engine\n'
    assert (target / "user_config.json").read_text() == "{}\n"
    assert oct((target / "boot.sh").stat().st_mode & 0o777) == "0o640" and oct(target.stat().st_mode & 0o777) == "0o750"
    assert cm.sync_container(container, str(scripts), 0o750, 0o640, False) == (False, digest)
    (target / "left-over.txt").write_text("old image")
    assert cm.sync_container(container, str(scripts), 0o750, 0o640, True)[0] is True  # check mode: reported only
    assert (target / "left-over.txt").exists()
    assert cm.sync_container(container, str(scripts), 0o750, 0o640, False)[0] is True
    assert not (target / "left-over.txt").exists()


def test_a_function_for_a_script_the_image_lacks_is_an_error(tmp_path):
    container = {"name": "c", "path": str(tmp_path / "c"), "files": {}, "functions": {"kv_pool.sh": {"set_kv_pool_env": {}}}}
    with pytest.raises(ValueError, match="kv_pool.sh is not among the startup scripts"):
        cm.sync_container(container, str(startup(tmp_path)), 0o750, 0o640, False)


def test_archive_members_below_the_directory_only(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, kind in (("startup", tarfile.DIRTYPE), ("startup/boot.sh", tarfile.REGTYPE),
                           ("startup/roles", tarfile.DIRTYPE), ("startup/roles/engine.sh", tarfile.REGTYPE),
                           ("startup/../../etc/passwd", tarfile.REGTYPE), ("startup/link", tarfile.SYMTYPE),
                           ("other/file", tarfile.REGTYPE)):
            info = tarfile.TarInfo(name)
            info.type = kind
            archive.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as archive:
        assert [m.name for m in cm._safe_members(archive, "startup")] == ["boot.sh", "roles", "roles/engine.sh"]
