"""Where judge and worker run (grader/engine/cpus.py), in the mode KATA_CPU_MODE forces."""

import os

from grader.protocol import expect, kata_test


@kata_test(level=1, category="correctness", description="judge and worker run where the mode says")
def test_judge_and_worker_cpus(solution):
    mode = os.environ["KATA_CPU_MODE"]
    worker, judge = solution.cpus(), sorted(os.sched_getaffinity(0))
    spin = solution._kata_bridge.main.spin_s
    if mode == "share":
        expect(len(judge) == 1 and worker == judge and spin == 0,
               "sharing: both pinned to one CPU, nobody polls",
               expected="one CPU for both, spin 0", got=f"judge {judge}, worker {worker}, spin {spin}")
    else:
        expect(len(judge) > 1 and worker == judge and spin > 0,
               "side by side: every allowed CPU for both, the judge polls",
               expected="all CPUs, spin > 0", got=f"judge {judge}, worker {worker}, spin {spin}")

