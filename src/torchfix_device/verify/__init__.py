"""Prove rewrites by running models: the fixture models and the before/after verifier.

Nothing here is imported by the rewrite engine, and only ``checker`` imports torch at import
time (it is used inside the harness interpreters); everything else imports it lazily, so
``torchfix-device verify`` without torch says what to install and exits 2.

Modules, one idea each:

``contract``  what a model file must define, read without running it (``ast``)
``checker``   the stand-in device checker: a dispatch mode that raises on mixed devices
``legacy``    shims that let legacy originals run on any target (``.cuda()``, ``loss.data[0]``,
              ``.item()`` on meta), counted so that a rewrite relying on one fails
``harness``   ``python -m torchfix_device.verify.harness``: one model file on DEV, then the CPU
``runtime``   what the harness runs share: seeding, importing the model file, failure records
``user_harness``  a user's model file in the harness: its models, built and called
``compare``   are the CPU numbers of original and rewrite the same?
``verifier``  one fixture: rewrite it, run original and rewrite in fresh interpreters, judge
``user_verifier``  a user's file: the same, model by model, with a verdict in plain words
``cli``       ``torchfix-device verify``: devices, the table or JSON, the exit code
``models/``   the bundled fixture models, one per seed article bug, plus one needing several

``verify --run COMMAND [PATH]``, the user's own command before and after the migration:

``run_session``   copy the project twice, migrate one copy, run the command in both, the verdict
``project_copy``  the copies (no ``.git`` or caches; virtualenvs linked)
``user_run``      one run of the command: its process group, timeout, exception, records
``child_hook``    the start-up hook (``sitecustomize``) of the command's Python processes: records,
                  and ``meta`` standing in for a GPU; it stands alone (stdlib and torch only)
``run_cli``       the report in plain words or JSON, the exit code
"""
