"""`bench replay --schedule office`: people who type for a while, then read.

The trace's requests are cut into sessions (typing in one place: from a file open or a cursor jump
to the next) and dealt to the people in turn. A person types a session at the trace's pace
(stretched by `time_scale`), then reads for a pause drawn from `think_s` (seconds, seeded), opening
`reads` other files of the repository during it - an editor's didOpen, which fimgate pre-warms: a
big prompt that nobody types into - and then types their next session. People start at staggered
times, so at any moment some type and others read. This is the traffic keystroke pins are for: a
typist's anchor against other people's file opens, rather than eight people typing in lockstep
(`--schedule consecutive`).
"""

from __future__ import annotations

import random
from dataclasses import replace

from fimgate.bench.workloads.trace import TraceRequest


def sessions(requests: list[TraceRequest]) -> list[list[TraceRequest]]:
    """Runs of typing in one place: a new session at each file change and at each warm-up
    (a file opened, the cursor jumped), which leads its session."""
    out: list[list[TraceRequest]] = []
    for r in requests:
        if out and out[-1][-1].file == r.file and not r.prewarm:
            out[-1].append(r)
        else:
            out.append([r])
    return out


def office_slices(
    requests: list[TraceRequest],
    users: int,
    time_scale: float = 1.0,
    think_s: tuple[float, float] = (30.0, 90.0),
    reads: int = 1,
    seed: int = 0,
) -> list[list[TraceRequest]]:
    rng = random.Random(seed)
    parts = sessions(requests)
    opened = [p[0] for p in parts]  # each session's file as it was when that session began
    out: list[list[TraceRequest]] = [[] for _ in range(users)]
    clock = [rng.uniform(0, think_s[1]) * 1000 for _ in range(users)]  # staggered starts (ms)
    for j, part in enumerate(parts):
        k = j % users
        t0, start = part[0].t_ms, clock[k]

        def at(t: float | None) -> float | None:
            return None if t is None else start + (t - t0) * time_scale

        out[k].extend(replace(r, t_ms=at(r.t_ms), next_event_ms=at(r.next_event_ms)) for r in part)
        end = at(part[-1].t_ms)
        pause = rng.uniform(*think_s) * 1000
        others = [o for o in opened if o.file != part[0].file]
        for n in range(reads if others else 0):
            f = rng.choice(others)
            out[k].append(
                TraceRequest(
                    index=-1,
                    t_ms=end + pause * (n + 1) / (reads + 1),
                    file=f.file,
                    text=f.text,
                    cursor=0,
                    next_event_ms=None,
                    typed_next="",
                    prewarm=True,
                )
            )
        clock[k] = end + pause
    return [sorted(p, key=lambda r: r.t_ms) for p in out if p]
