"""Where a RUNNABLE job stands in its queue, from its place in its share.

The queue serves shares in rank order one job at a time: round k holds every share's k-th
job. So the k-th job of the share ranked r is numbered
    1 + (jobs in rounds 0..k-1) + (shares ranked before r that also have a k-th job).
The control plane stores only share ranks and computes this on read, so a tick never has to
rewrite the position of every waiting job when one job starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate


class QueueNumbering:
    def __init__(self, counts_in_rank_order: Sequence[int]):
        """`counts_in_rank_order`: RUNNABLE jobs per share, shares in queue-rank order."""
        self.counts = list(counts_in_rank_order)
        longest = max(self.counts, default=0)
        ending_at = [0] * longest
        for count in self.counts:
            if count:
                ending_at[count - 1] += 1
        round_sizes = list(accumulate(reversed(ending_at)))[::-1]  # shares with a k-th job
        self.round_start = list(accumulate(round_sizes, initial=1))

    def position(self, rank_index: int, position_in_share: int) -> int | None:
        """None when the share holds fewer jobs than `position_in_share` (a stale read)."""
        if not 0 <= rank_index < len(self.counts) or not (
            1 <= position_in_share <= self.counts[rank_index]
        ):
            return None
        k = position_in_share - 1
        earlier = sum(1 for count in self.counts[:rank_index] if count > k)
        return self.round_start[k] + earlier
