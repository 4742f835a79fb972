"""manage.py create_aws_key prints the pair on its last line; deactivated users' keys stop."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from quotaportal.awsbatch.keys import active_key
from quotaportal.awsbatch.models import AccessKey


def test_create_aws_key_prints_id_and_secret_on_its_last_line(people):
    out = StringIO()
    call_command("create_aws_key", "alice", stdout=out, stderr=StringIO())
    key_id, secret = out.getvalue().strip().splitlines()[-1].split(" ")
    key = AccessKey.objects.get(access_key_id=key_id)
    assert (key.user, key.secret_access_key, len(secret)) == (people.alice, secret, 40)
    assert secret.isalnum()
    people.alice.is_active = False
    people.alice.save()
    assert active_key(key_id) is None


def test_create_aws_key_names_a_missing_user(db):
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("create_aws_key", "nobody", stdout=StringIO(), stderr=StringIO())
