"""Unit tests of plugins/module_utils/motor_configmap.py: the rendered directory (functions injected, files written once,
stale files removed) and the tar members taken from the image archive."""

from __future__ import annotations

import io
import os
import subprocess
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


def test_functions_are_written_like_pymotors_generator():
    # lib/utils.py shell_escape + update_shell_safely: $ is left for the shell to expand, quotes and backticks escaped
    text = cm.render_functions("start\n", {"set_prefill_env": {"B": 'say "$x" `y`', "A": "1"}, "set_decode_env": {}})
    assert text == ('function set_prefill_env() {\n    export B="say \\"$x\\" \\`y\\`"\n    export A="1"\n}\n'
                    'function set_decode_env() {\n    :\n}\nstart\n')


def test_an_existing_function_is_replaced_in_place():
    script = "echo a\nfunction set_kv_pool_env() {\n    export OLD=1\n}\necho b\n"
    assert cm.inject_function(script, "set_kv_pool_env", {"NEW": "2"}) == \
        'echo a\nfunction set_kv_pool_env() {\n    export NEW="2"\n}\necho b\n'


def test_the_functions_run_in_bash_with_dollar_expansion(tmp_path):
    script = tmp_path / "common.sh"
    script.write_text(cm.render_functions('set_common_env\necho "$LD_LIBRARY_PATH|$Q"\n',
                                          {"set_common_env": {"LD_LIBRARY_PATH": "/x:$LD_LIBRARY_PATH", "Q": 'a"b'}}))
    out = subprocess.run(["bash", str(script)], env={"LD_LIBRARY_PATH": "/cann", "PATH": os.environ["PATH"]},
                         capture_output=True, text=True, check=True).stdout
    assert out == '/x:/cann|a"b\n'


def test_role_scripts_are_flat_next_to_boot_sh(tmp_path):
    # both PyMotor delivery paths (the K8s ConfigMap, the docker-only guide) put startup/roles/* next to boot.sh,
    # which sources "$SCRIPT_DIR/engine.sh"
    scripts = startup(tmp_path)
    files = cm.wanted_files(str(scripts), {"name": "c", "functions": {}, "files": {"user_config.json": "{}"}})
    assert sorted(files) == ["boot.sh", "engine.sh", "user_config.json"]
    (scripts / "engine.sh").write_text("clash\n")
    with pytest.raises(ValueError, match="engine.sh is both a startup script and a role script"):
        cm.wanted_files(str(scripts), {"name": "c"})


def test_the_kv_patch_block_is_prepended_once(tmp_path):
    scripts = startup(tmp_path)
    container = {"name": "c", "prepend": {"boot.sh": "# patch_begin\npatch it\n# patch_end\n"}}
    assert cm.wanted_files(str(scripts), container)["boot.sh"] == \
        b"# patch_begin\npatch it\n# patch_end\n#!/bin/bash\nsource common.sh\n"
    (scripts / "boot.sh").write_text("# patch_begin\nthe image's own\n")  # PyMotor's deployer: never twice
    assert cm.wanted_files(str(scripts), container)["boot.sh"] == b"# patch_begin\nthe image's own\n"


def test_sync_writes_once_injects_functions_and_removes_stale_files(tmp_path):
    scripts = startup(tmp_path)
    target = tmp_path / "etc" / "job" / "job-p0-0"
    container = {"name": "job-p0-0", "path": str(target), "files": {"user_config.json": "{}\n"},
                 "functions": {"engine.sh": {"set_prefill_env": {"ROLE": "prefill"}}}}
    changed, digest = cm.sync_container(container, str(scripts), 0o750, 0o640, False)
    assert changed
    assert (target / "engine.sh").read_text() == 'function set_prefill_env() {\n    export ROLE="prefill"\n}\nstart_engine\n'
    assert not (target / "roles").exists()
    assert (target / "user_config.json").read_text() == "{}\n"
    assert oct((target / "boot.sh").stat().st_mode & 0o777) == "0o640" and oct(target.stat().st_mode & 0o777) == "0o750"
    assert cm.sync_container(container, str(scripts), 0o750, 0o640, False) == (False, digest)
    (target / "left-over.txt").write_text("old image")
    (target / "roles").mkdir()
    (target / "roles" / "engine.sh").write_text("an older render")
    assert cm.sync_container(container, str(scripts), 0o750, 0o640, True)[0] is True  # check mode: reported only
    assert (target / "left-over.txt").exists()
    assert cm.sync_container(container, str(scripts), 0o750, 0o640, False)[0] is True
    assert not (target / "left-over.txt").exists() and not (target / "roles").exists()


def test_a_kept_file_stays_as_it_is_while_the_others_follow(tmp_path):
    # a running container's user_config.json: upstream's sync loop would cp -f a changed one into the container
    scripts = startup(tmp_path)
    target = tmp_path / "etc" / "job" / "job-coordinator"
    container = {"name": "job-coordinator", "path": str(target), "keep": ["user_config.json"],
                 "files": {"user_config.json": '{"p_instances_num": 1}\n', "env.json": "{}\n"}}
    changed, first = cm.sync_container(container, str(scripts), 0o750, 0o640, False)
    assert changed and (target / "user_config.json").read_text() == '{"p_instances_num": 1}\n'  # absent: written
    before = (target / "user_config.json").stat()
    container["files"] = {"user_config.json": '{"p_instances_num": 2}\n', "env.json": '{"A": "1"}\n'}
    changed, digest = cm.sync_container(container, str(scripts), 0o750, 0o640, False)
    assert changed and (target / "env.json").read_text() == '{"A": "1"}\n'
    after = (target / "user_config.json").stat()
    assert (target / "user_config.json").read_text() == '{"p_instances_num": 1}\n'
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not even rewritten
    assert cm.sync_container(container, str(scripts), 0o750, 0o640, False) == (False, digest)  # idempotent
    container["keep"] = []
    assert cm.sync_container(container, str(scripts), 0o750, 0o640, False)[0] is True
    assert (target / "user_config.json").read_text() == '{"p_instances_num": 2}\n'


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
