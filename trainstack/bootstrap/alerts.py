"""What a node's alerts follower needs (docs/alerts.md), as job settings (settings.env): it changes with
the profile, so it travels the job settings channel and a changed ``alerts:`` reaches a running node at
its next job start, replacing nothing. The webhook is named by its KMS secret, never its URL."""

from __future__ import annotations

from trainstack.plan import Plan


def alerts_env_pairs(plan: Plan) -> list[tuple[str, object]]:
    """ALERTS_* and the plan's figures the posts compare with the heartbeat's; none without alerts."""
    a = plan.job.alerts
    if a is None:
        return []
    tokens = plan.estimate.tokens_per_second
    return [("ALERTS_SECRET", a.kms_secret), ("ALERTS_FORMAT", a.format), ("ALERTS_EVENTS", " ".join(a.events)),
            ("ALERTS_RELAY", f"http://{a.relay.removeprefix('http://').rstrip('/')}" if a.relay else ""),
            ("PLAN_TOKENS_PER_SECOND", "" if tokens is None else round(tokens, 1)),
            ("PLAN_HOURLY_CNY", "" if plan.hourly_cost_cny is None else round(plan.hourly_cost_cny, 4))]
