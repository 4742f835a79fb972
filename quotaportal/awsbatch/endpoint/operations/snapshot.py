"""GetJobQueueSnapshot: the front of the queue, each share's head, and utilization."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from quotaportal.awsbatch.conventions import arn, ms
from quotaportal.awsbatch.endpoint import lookups
from quotaportal.awsbatch.endpoint.operations.registry import operation
from quotaportal.awsbatch.endpoint.wire import required
from quotaportal.quotas import selectors


@operation("GetJobQueueSnapshot")
def get_job_queue_snapshot(actor, body):
    queue = lookups.job_queue(required(body, "jobQueue"))
    snapshot = selectors.queue_snapshot(queue)
    updated = ms(snapshot["last_tick_at"]) or ms(datetime.now(tz=UTC))
    arns = {row["id"]: arn("service-job", str(row["id"])) for row in snapshot["front_of_queue"]}

    def entry(row):
        # We do not keep when a job reached its place; the last tick is when it was seen there.
        return {"jobArn": arns[row["id"]], "earliestTimeAtPosition": updated}

    usage = defaultdict(int)
    per_share = []
    for share, units in snapshot["share_utilization"].items():
        used = {unit: figures["used"] for unit, figures in units.items() if figures["used"]}
        for unit, count in used.items():
            usage[unit] += count
        if used:
            per_share.append((sum(used.values()), share, used))
    per_share.sort(key=lambda item: (-item[0], item[1]))
    return {
        "frontOfQueue": {
            "jobs": [entry(row) for row in snapshot["front_of_queue"]],
            "lastUpdatedAt": updated,
        },
        "frontOfQuotaShares": {
            "quotaShares": {
                share: [entry(row)] for share, row in snapshot["front_of_quota_shares"].items()
            },
            "lastUpdatedAt": updated,
        },
        "queueUtilization": {
            "totalCapacityUsage": [
                {"capacityUnit": unit, "quantity": count} for unit, count in sorted(usage.items())
            ],
            "quotaShareUtilization": {
                "topCapacityUtilization": [
                    {
                        "quotaShareName": share,
                        "capacityUsage": [
                            {"capacityUnit": u, "quantity": n} for u, n in sorted(used.items())
                        ],
                    }
                    for _, share, used in per_share[:20]
                ]
            },
            "lastUpdatedAt": updated,
        },
    }
