"""The recovery sweep: what a failure left behind, put back on its way.

Runs every minute from beat (the "Fail and retry stalled index jobs"
schedule) and whenever a worker connects to the broker (at start and after
an outage), so an outage heals as soon as the broker is back.
"""

import logging

from sources import heartbeats, jobs, queueing

log = logging.getLogger(__name__)


def recovery_sweep() -> dict[str, list[int]]:
    """Hand on jobs whose worker died; send again what waited for the broker. Returns the ids by kind."""
    done = {"jobs_handed_on": jobs.jobs_reap(), **queueing.waiting_resend()}
    heartbeats.heartbeat_record(heartbeats.SWEEP)
    if any(done.values()):
        log.info("recovery sweep: %s", {kind: ids for kind, ids in done.items() if ids})
    return done
