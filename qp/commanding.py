"""What every qp command shares: the consoles it prints on, the portal's client with the
stored token, and the decorator that adds --json and turns failures into their message and
exit code."""

from __future__ import annotations

import functools
import json
import sys

import click
from rich.console import Console

from qp import config, directives
from qp.client import USAGE, Client, Failure

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)


def client() -> Client:
    settings = config.load()
    return Client(settings.url, settings.token)


def command(fn):
    """A qp command: --json, and failures turned into their message and exit code."""

    @click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
    @functools.wraps(fn)
    def wrapper(*args, as_json: bool, **kwargs):
        try:
            result = fn(*args, as_json=as_json, **kwargs)
        except Failure as failure:
            if as_json:
                body = {"error": failure.message, "status": failure.status}
                click.echo(json.dumps({**body, "detail": failure.detail}))
            else:
                err.print(f"qp: {failure.message}", markup=False)
            sys.exit(failure.code)
        except directives.Invalid as invalid:
            err.print(f"qp: {invalid}", markup=False)
            sys.exit(USAGE)
        if as_json and result is not None:
            click.echo(json.dumps(result, indent=2, default=str))

    return wrapper
