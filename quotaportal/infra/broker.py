"""The Celery broker's Redis transport, with one fix: a worker survives losing Redis.

When the connection drops, the worker closes its channel, and kombu then tries to hand the
messages it had prefetched back to Redis through that very connection, which is gone by then
(`'NoneType' object has no attribute 'hostname'` in `_connparams`): the error is not one the
worker treats as recoverable, so it exits ("Unrecoverable error"), in about one outage in
four under load. Nothing can be sent through a connection that is gone; the messages stay in
Redis' index of unacknowledged ones, from which the transport hands them back once their
visibility timeout passes (or they went with Redis, if it restarted empty). Ticks, the
usual messages, come again every few seconds anyway.
"""

from __future__ import annotations

import logging

from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)


class QoS(kombu_redis.QoS):
    def restore_unacked(self, client=None):
        if client is None and self.channel.connection.client is None:
            log.warning(
                "the broker connection is gone: %d prefetched message(s) stay with Redis "
                "until their visibility timeout",
                len(self._delivered),
            )
            self._delivered.clear()
            return None
        return super().restore_unacked(client)


class Channel(kombu_redis.Channel):
    QoS = QoS


class Transport(kombu_redis.Transport):
    Channel = Channel
