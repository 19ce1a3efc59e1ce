"""`python bench/capacity ARGS`: the same as `python bench/capacity/run.py ARGS`."""

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).with_name("run.py")), run_name="__main__")
