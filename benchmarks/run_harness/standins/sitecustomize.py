"""Loaded by every interpreter the run harness starts (this folder is first on PYTHONPATH).

It does nothing unless ``RUN_HARNESS=1`` is set: then it installs the stand-ins of
``run_harness_standins`` (random data, a step limit, no-op plotting, documented library drift),
identically for the original script and its rewrites. Nothing here touches torch's behaviour.
"""

import os

if os.environ.get("RUN_HARNESS") == "1":
    try:
        import run_harness_standins

        run_harness_standins.install()
    except Exception:  # a broken stand-in must show, not silently change the run
        import traceback

        traceback.print_exc()
        raise SystemExit("[run-harness] the stand-ins failed to install")
