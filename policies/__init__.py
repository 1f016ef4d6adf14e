"""trainstack's CrossGuard policy pack.

``policies.rules.ALL_POLICIES`` are the policy objects; ``policies.runner.run_policies`` runs them
offline (``trainstack plan``); ``__main__.py`` serves them to the Pulumi engine
(``pulumi preview --policy-pack policies``). See docs/policies.md.

This file makes ``policies`` a regular package, so ``import policies`` from the repository root
always finds this directory (and never a namespace directory such as ``tests/policies``).
"""
