# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shim: a local module proxy checked against a pinned go.sum (logic in plugin_utils/go_sum.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: motor_go_sum_problems
short_description: Internal - the modules of a local Go module proxy whose checksum differs from go.sum
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's roles, not a public interface; its options and results may change in any release.
  - Hashes each C(<module>/@v/<version>.zip) and C(.mod) file of a module proxy directory on the controller the way Go
    does (C(h1:), golang.org/x/mod/sumdb/dirhash) and compares it with the line of the pinned go.sum, so that
    P(pymotor.ascend.conductor_image#role) refuses a tampered or stale mirror before any build container starts.
  - Files go.sum does not name are left to Go's own check in the build.
positional: _input, go_sum
options:
  _input:
    description: The module proxy directory (the layout of C($GOMODCACHE/cache/download)).
    type: path
    required: true
  go_sum:
    description: The pinned go.sum file.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Refuse a module proxy that differs from go.sum
  ansible.builtin.assert:
    that: conductor_image_goproxy_dir | pymotor.ascend.motor_go_sum_problems(conductor_image_go_sum) | length == 0
"""

RETURN = r"""
_value:
  description: One problem per file whose hash differs from its pin; empty when all match.
  type: list
  elements: str
  sample:
    - "/tmp/pymotor-go-sum-sample/example.com/m/@v/v1.0.0.mod: example.com/m@v1.0.0: checksum mismatch: go.sum pins
      h1:c3RhbGU=, the file hashes to h1:flS2VctbRrTv+sBE+VKgxx6hlkMGPVz9MGOmzMYFg3k= (the mirror's copy differs from
      the module go.sum was written for: fetch it again from a trusted proxy, or check which go.sum is pinned)"
"""

from ansible_collections.pymotor.ascend.plugins.plugin_utils.go_sum import go_sum_problems


def motor_go_sum_problems(goproxy_dir, go_sum):
    """One line per proxy file whose checksum differs from go.sum."""
    return go_sum_problems(str(goproxy_dir), str(go_sum))


class FilterModule:
    """The pymotor.ascend.motor_go_sum_problems filter."""

    def filters(self):
        """Return the filters of this plugin."""
        return {"motor_go_sum_problems": motor_go_sum_problems}
