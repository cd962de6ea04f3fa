"""Hypothesis profiles: `ci` (the default of scripts/test-python.sh) keeps example counts
modest so the suite stays within a few minutes on 2 cores; `long` searches longer."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("long", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
