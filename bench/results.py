"""The figures a benchmark run produces, as data: each printed figure that a comparison can
read is also recorded here, one JSON line per figure, in the file `OMNIFORGE_BENCH_RESULTS`
names (nothing is recorded without it)."""

import json
import os
from typing import Literal

RESULTS_ENV = "OMNIFORGE_BENCH_RESULTS"

Better = Literal["lower", "higher"]


def record(figure: str, value: float, unit: str, better: Better) -> None:
    """`figure` measured as `value` `unit`; `better` says which way is an improvement."""
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    line = {"figure": figure, "value": value, "unit": unit, "better": better}
    with open(path, "a", encoding="utf-8") as results:
        results.write(json.dumps(line) + "\n")
