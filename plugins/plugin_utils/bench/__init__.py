# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The trace-replay benchmark (playbooks/benchmark.yml): workload and prompts (``workload``), the report and its
numbers (``report``), the HTML page (``html``) - all pure - and the replay against a deployed job (``replay``,
standard-library HTTP only)."""
