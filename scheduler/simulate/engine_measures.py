"""The simulator's measures: usage per share and unit, borrowed and idle instance-time, and
the usage samples over time."""

from __future__ import annotations

from collections import defaultdict

from scheduler.fairshare import Counts, Decayed, standings
from scheduler.model import Job


class Measuring:
    """QueueSimulation's accounting (a mixin: it reads and writes the simulation's state)."""

    def _use(self, job: Job, sign: int) -> None:
        key = (job.share, job.unit)
        self._settle(key)
        self._count_priority(key, job.priority, sign)
        delta = sign * job.quantity
        used = self.usage[key] = self.usage[key] + delta
        self.total[job.unit] += delta
        share = self.shares[job.share]
        (self.reserve_used_total if share.reserves_idle else self.lend_used_total)[job.unit] += (
            delta
        )
        borrowed_units = self.borrowing.get(job.share)
        if used > share.limits.get(job.unit, 0):
            if borrowed_units is None:
                borrowed_units = self.borrowing[job.share] = set()
            borrowed_units.add(job.unit)
            self.borrowers_on[job.unit].add(job.share)
        elif borrowed_units is not None:
            borrowed_units.discard(job.unit)
            self.borrowers_on[job.unit].discard(job.share)
            if not borrowed_units:
                del self.borrowing[job.share]

    def _count_priority(self, key: tuple[str, str], priority: int, sign: int) -> None:
        counts = self.priorities[key]
        counts[priority] += sign
        if not counts[priority]:
            del counts[priority]

    def _settle(self, key: tuple[str, str]) -> None:
        """Add the share's use of the unit since its last change to the time integrals."""
        since = self._since.get(key, self.now)
        used = self.usage[key]
        if used and self.now > since:
            limit = self.shares[key[0]].limit(key[1])
            self.run.own_s[key[0]] += min(used, limit) * (self.now - since)
            self.run.borrowed_s[key[0]] += max(0, used - limit) * (self.now - since)
            if self.fair_policy is not None:
                self._count_fair_use(key, used, limit, since)
        self._since[key] = self.now

    def _count_fair_use(self, key: tuple[str, str], used: int, limit: int, since: float) -> None:
        """The share's decayed use of the unit (scheduler.fairshare), over [since, now]."""
        counted = used if self.fair_policy.counts is Counts.ALL else max(0, used - limit)
        if counted:
            decayed = self.fair_used.get(key)
            if decayed is None:
                decayed = self.fair_used[key] = Decayed(0.0, since)
            decayed.add_rate(counted, since, self.now, self.fair_policy.half_life_seconds)

    def _fair_standing(self) -> dict[str, float] | None:
        """Each share's standing now: its decayed use of every unit over its weight."""
        policy = self.fair_policy
        if policy is None:
            return None
        for key in list(self._since):
            self._settle(key)
        use: dict[str, float] = defaultdict(float)
        for (share, _), decayed in self.fair_used.items():
            use[share] += decayed.as_of(self.now, policy.half_life_seconds)
        return standings(use, policy, use)

    def _account(self, until: float) -> None:
        """Idle capacity while jobs waited, and the samples due, for the time up to `until`."""
        span = until - self.now
        if span > 0:
            for unit, waiting in self.waiting_shares.items():
                if waiting:
                    free = self.capacity.get(unit, 0) - self.total.get(unit, 0)
                    self.run.idle_while_waiting_s += max(0, free) * span
        if self.sample_every_s:
            while self.next_sample_s <= until:
                self._sample(self.next_sample_s)
                self.next_sample_s += self.sample_every_s

    def _sample(self, at: float) -> None:
        used: dict[str, dict[str, int]] = defaultdict(dict)
        for (share, unit), count in self.usage.items():
            if count:
                used[share][unit] = count
        self.run.samples.append((at, dict(used), dict(self.capacity)))
