# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shim: the rules of the contract that task files apply themselves (logic in plugin_utils/contract.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: motor_contract_job_id_problem
short_description: Internal - the problem with a job_id, by the one rule validation and planning apply
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - "Returns the problem with a job_id as text, C(<path>: <what> (<hint>)), or an empty string when it follows the
    rule - a DNS label of 1-63 lowercase letters, digits and C(-), as PyMotor uses it for the Kubernetes namespace."
  - The same rule (C(plugins/plugin_utils/contract.py)) decides in P(pymotor.ascend.motor_config#filter),
    P(pymotor.ascend.motor_plan#filter) and C(destroy.yml), which removes the directory named after the job.
positional: _input
options:
  _input:
    description: The job id.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Refuse a job id that breaks the rule
  ansible.builtin.assert:
    that: motor_job_id | pymotor.ascend.motor_contract_job_id_problem | length == 0
"""

RETURN = r"""
_value:
  description: The problem, empty when the job id follows the rule.
  type: str
  sample: "motor_deploy_config.job_id: 'Mindie_Motor' cannot prefix container names: not a DNS label (use 1-63 lowercase
    letters, digits and '-', starting and ending with a letter or digit)"
"""

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import job_id_problem


def motor_contract_job_id_problem(job_id):
    """The problem with a job_id as text, empty when it follows the rule."""
    problem = job_id_problem(job_id)
    return "" if problem is None else str(problem)


class FilterModule:
    """The pymotor.ascend.motor_contract_* filters."""

    def filters(self):
        """Return the filters of this plugin."""
        return {"motor_contract_job_id_problem": motor_contract_job_id_problem}
