"""`trainplane status JOB`: a training job's timeline from the cluster and Prometheus (issue 19).

reader.py reads (the `kubernetes` client, Prometheus' HTTP API), timeline.py builds the timeline from plain
dicts (causes.py names each restart's cause, goodput.py its lost steps and GPU-hours), render.py prints it.
The command itself is infra/commands/status.py.
"""

from __future__ import annotations

from infra.status.api import JobState
from infra.status.goodput import Loss, Series
from infra.status.timeline import Timeline, build

__all__ = ["JobState", "Loss", "Series", "Timeline", "build"]
