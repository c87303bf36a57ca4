# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Write a file on the Ansible controller from an action plugin's worker process (no module run): only when its
content or mode differs, atomically (a temporary sibling renamed), the diff with secrets masked on both sides."""

from __future__ import annotations

import difflib
import os
import stat
import tempfile

from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import mask_document


def write_file(dest, content, mode, check_mode=False, want_diff=False, directory_mode=None):
    """{dest, changed[, diff]} for writing ``content`` (text) to ``dest`` with ``mode`` (an int); raises OSError.
    ``directory_mode`` (an int): the parent directory's exact mode, also when it exists (else a missing parent is
    created 0750 and an existing one left as it is)."""
    path = os.path.abspath(os.path.expanduser(dest))
    data = content.encode("utf-8", errors="surrogateescape")
    result = {"dest": path, "changed": False}
    directory = os.path.dirname(path)
    if directory_mode is not None and os.path.isdir(directory) and \
            stat.S_IMODE(os.stat(directory).st_mode) != directory_mode:
        result["changed"] = True
        if not check_mode:
            os.chmod(directory, directory_mode)
    current = None
    if os.path.isfile(path):
        with open(path, "rb") as handle:
            current = handle.read()
        if current == data and stat.S_IMODE(os.stat(path).st_mode) == mode:
            return result
    result["changed"] = True
    if want_diff:  # secrets masked on both sides: an older file may still hold them in clear
        before, before_header = "", "%s (absent)" % path
        if current is not None:
            before = mask_document(current.decode("utf-8", errors="replace"))
            before_header = "%s (mode %04o)" % (path, stat.S_IMODE(os.stat(path).st_mode))
        result["diff"] = {"before_header": before_header, "after_header": "%s (mode %04o)" % (path, mode),
                          "before": before, "after": mask_document(content)}
    if check_mode:
        return result
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o750)
        if directory_mode is not None:
            os.chmod(directory, directory_mode)  # exact: makedirs' mode is cut by the umask
    handle, tmp_path = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(tmp_path, mode)
        os.replace(tmp_path, path)
    except BaseException:
        os.unlink(tmp_path)
        raise
    return result


def diff_text(diff, context=3):
    """The unified diff of a write_file ``diff`` as Ansible's callbacks print one (for a result that is not shown)."""
    before, after = diff["before"].splitlines(True), diff["after"].splitlines(True)
    return "".join(difflib.unified_diff(before, after, fromfile="before: %s" % diff["before_header"],
                                        tofile="after: %s" % diff["after_header"], n=context))
